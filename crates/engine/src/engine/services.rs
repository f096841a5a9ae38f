//! What the backends work with besides the loop: the parts of the engine
//! that carry out what the core decides, shared by every clone of the
//! handle.

use crate::events::EventLog;
use crate::network::Network;
use crate::volumes::Volumes;
use holdfast_adapter_containerd::Adapter;
use std::path::PathBuf;
use std::sync::Arc;

/// What the backends work with besides the loop, shared by every clone of
/// the handle.
#[derive(Debug)]
pub(crate) struct Services {
    pub(crate) adapter: Adapter,
    pub(crate) network: Network,
    pub(crate) events: Arc<EventLog>,
    pub(crate) volumes: Arc<Volumes>,
    /// The data root: where uploads, saves and layers are staged, beside
    /// the image content they become.
    pub(crate) data_root: PathBuf,
}
