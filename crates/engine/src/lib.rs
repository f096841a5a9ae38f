//! # holdfast-engine
//!
//! The engine of `holdfastd`: everything between an API and containerd.
//!
//! - [`engine`]: the one task that owns the core and reads the clock; every
//!   API reaches it through an [`engine::EngineHandle`].
//! - [`store`]: records on disk (redb), written before the calls that need them.
//! - [`supervisor`]: the embedded containerd (the default).
//! - [`logs`]: `docker logs` and attach output, read from the json-file log
//!   that holdfastd itself writes when the shim runs it as `binary://` logger.
//! - [`events`]: `docker events` history and live feed.
//! - [`network`], [`volumes`], [`execs`], [`health`]: the executors of what
//!   the core decides about networks, volumes, execs and health probes.

pub mod archive;
pub mod backend;
pub mod dockerfile;
pub mod engine;
pub mod events;
pub mod execs;
pub mod health;
pub mod health_config;
pub mod logs;
pub mod network;
pub mod port_keys;
pub mod rootfs;
pub mod runtime_spec;
pub mod seed_image;
pub mod stats;
pub mod stdio;
pub mod store;
pub mod supervisor;
pub mod volumes;
