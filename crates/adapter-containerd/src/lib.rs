//! # holdfast-adapter-containerd
//!
//! Carries out the core's [`Call`](holdfast_core::Call)s against a real containerd and turns what
//! containerd says (answers, events, failures) into core [`Input`](holdfast_core::Input)s. It
//! decides nothing: reconnect timing, retries and every judgement about a
//! container belong to the core.
//!
//! ## Using it
//! ```no_run
//! # async fn run() -> Result<(), holdfast_adapter_containerd::AdapterError> {
//! use holdfast_adapter_containerd::{Adapter, AdapterConfig};
//! use holdfast_core::{Call, Input, OpId};
//!
//! let config = AdapterConfig::new("/run/holdfast/containerd.sock", "holdfast", "/usr/bin/holdfastd", "/var/lib/holdfast/logs");
//! // Lazy: works before containerd is up and recovers after it restarts.
//! let adapter = Adapter::new(config)?;
//! let (sink, mut inputs) = tokio::sync::mpsc::unbounded_channel::<Input>();
//! // For every `Action::Call { op, call }` the core emits:
//! tokio::spawn(adapter.execute(OpId(1), Call::Subscribe, sink.clone()));
//! while let Some(input) = inputs.recv().await {
//!     // core.handle_input(now, input); drain actions; spawn calls ...
//! }
//! # Ok(()) }
//! ```
//!
//! ## What each call produces
//! Every call produces exactly one result:
//! - ordinary calls: one `Input::ActionResult(op, ..)`, with `Done::TaskCreated`
//!   for `CreateTask`, or a [`Failure`](holdfast_core::Failure) classified
//!   from the gRPC status ([`classify_status`]); every RPC has a deadline.
//! - `Subscribe`: `ConnectionFact::StreamLive(op)` once events really flow
//!   (proved with a ping on a private topic), then `Input::Event`s, then
//!   `ConnectionFact::StreamBroken(op, ..)` when it ends; or an
//!   `ActionResult` failure if it never became live. A new `Subscribe`
//!   replaces the previous subscription. A broken stream is never an exit.
//! - `Relist`: `Relist(op, Begin)`, one `Task` per task, `End`; or an
//!   `ActionResult` failure.
//!
//! Besides: `ConnectionFact::Unreachable` whenever a call finds containerd
//! unreachable, and `ConnectionFact::Connected` when a call succeeds while
//! containerd was last seen unreachable (or for the first time).
//!
//! The daemon also calls [`Adapter::import_image`], [`Adapter::pull_image`], [`Adapter::resolve_image`],
//! [`Adapter::list_images`], [`Adapter::exec`] and [`Adapter::delete_exec`]
//! directly, outside the core.

mod client;
mod commit;
mod container;
mod decode;
mod distribution;
mod document;
mod error;
mod events;
mod exec;
mod host;
mod image;
mod import;
pub mod logger;
mod oom;
mod pull;
mod push;
mod relist;
mod save;
mod search;
mod seccomp;
mod snapshot;
mod spec;
mod stdio;
mod store;

pub use client::{Adapter, AdapterConfig, InputSink, call_name};
pub use commit::NewImage;
pub use container::{RootfsMount, ensure_fifo};
pub use decode::{DecodeError, decode_event, decode_fuzz_input, wall_time};
pub use distribution::{DistributionInspect, DistributionPlatform};
pub use document::image_document_fuzz_input;
pub use error::{AdapterError, RegistryFailure, classify_status};
pub use exec::ExecRequest;
pub use host::find_init_binary;
pub use image::{
    DANGLING_REPOSITORY, HistoryEntry, ImageConfig, ImageSummary, ResolvedImage, chain_id,
    dangling_name, digest_reference, host_architecture, is_dangling, normalize_reference,
    repository_of,
};
pub use import::ImportedImage;
pub use pull::{
    LayerStatus, MAX_DOCUMENT_BYTES, PullAuth, PullProgress, PullSink, PulledImage, check_login,
    is_loopback_registry, pull_target,
};
pub use push::{PushProgress, PushSink, PushStatus, PushedImage};
pub use save::SavedImage;
pub use search::{SearchResult, search_registry, search_target};
pub use spec::{
    ALL_CAPABILITIES, ENGINE_BOUND_FILES, HostDevice, HostFacts, User, build_spec, capability_name,
    group_id, is_engine_mount_point, resolve_user,
};
