//! # holdfast-engine
//!
//! The engine of `holdfastd`: everything between an API and containerd.
//! [`start::start`] starts it from plain parameters; every API reaches it
//! through an [`engine::EngineHandle`]: a command for the core (the one
//! place that decides), a read of the core's views, or the backend of its
//! endpoint family ([`backend`]).
//!
//! - [`engine`]: the one task that owns the core and reads the clock; it
//!   carries out the core's actions and feeds their results back.
//! - [`backend`]: per API family, the narrow interface that family needs.
//! - [`store`]: records on disk (redb), written before the calls that need them.
//! - [`supervisor`]: the embedded containerd (the default).
//! - [`logs`]: `docker logs` and attach output, read from the json-file log
//!   that holdfastd itself writes when the shim runs it as `binary://` logger;
//!   [`stdio`]: a client's input into a stdin FIFO.
//! - [`events`]: `docker events` history and live feed.
//! - [`network`], [`volumes`], [`execs`], [`health`]: the executors of what
//!   the core decides about networks, volumes, execs and health probes.
//! - [`archive`] and [`rootfs`]: `docker cp`'s helper, chrooted into a
//!   container's root; [`stats`]: a container's cgroup.
//! - [`health_config`], [`dockerfile`], [`port_keys`]: the parts of Docker's
//!   image config the engine reads and writes (a health check, `--change`,
//!   exposed ports), shared with the API that decodes the same formats.
//! - [`runtime_spec`]: the pure spec builder an API checks its decoding
//!   against; [`seed_image`]: `busybox:latest` from the host's busybox.

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
pub mod path_io;
pub mod port_keys;
pub mod refusal;
pub mod rootfs;
pub mod runtime_spec;
pub mod seed_image;
pub mod start;
pub mod stats;
pub mod stdio;
pub mod store;
pub mod supervisor;
pub mod volumes;
