//! `/containers/...`: create, list, inspect, the lifecycle commands, wait and
//! remove, a file each. Translation only: the core decides, through the
//! engine's handle and its containers backend.

mod create;
mod create_body;
mod create_options;
mod inspect;
mod lifecycle;
mod list;

pub use create::create;
pub use create_body::decode_create;
pub(crate) use create_body::{RestartPolicyBody, restart_policy};
pub use inspect::inspect;
pub use lifecycle::{
    kill, pause, remove, resize, restart, start, stop, unpause, unsupported, wait,
};
pub use list::list;
pub(crate) use list::list_json;

use holdfast_core::{ContainerConfig, NetworkMode};
use holdfast_engine::backend::containers::Sizes;
use serde_json::{Map, Value, json};

/// `SizeRw` and `SizeRootFs`, measured (`size=1` of inspect and ps, and
/// `system df`); `SizeRootFs` left out when its image is gone.
pub(crate) fn insert_sizes(o: &mut Map<String, Value>, sizes: &Sizes) {
    o.insert("SizeRw".to_owned(), json!(sizes.rw));
    if let Some(root_fs) = sizes.root_fs {
        o.insert("SizeRootFs".to_owned(), json!(root_fs));
    }
}

fn network_mode_name(m: NetworkMode) -> &'static str {
    match m {
        NetworkMode::None => "none",
        NetworkMode::Host => "host",
        NetworkMode::Bridge => "bridge",
        NetworkMode::Container => "container",
    }
}

/// The network mode as docker shows it: `bridge`, a user network's name,
/// `host`, `none` or `container:<id>`.
fn network_mode_shown(c: &ContainerConfig) -> String {
    match (c.network, &c.network_name, &c.network_container) {
        (NetworkMode::Bridge, Some(name), _) => name.clone(),
        (NetworkMode::Container, _, Some(donor)) => format!("container:{}", donor.id),
        (m, ..) => network_mode_name(m).to_owned(),
    }
}

/// The command line `ps` shows and inspect's Path/Args (what was given;
/// the image's defaults fill in what was not).
fn command_line(c: &ContainerConfig) -> Vec<String> {
    let mut v = c.entrypoint.clone().unwrap_or_default();
    v.extend(c.cmd.clone().unwrap_or_default());
    v
}
