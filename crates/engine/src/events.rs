//! `docker events`: a bounded history for `since`, and a broadcast for
//! subscribers. Subscribing takes the history and the live feed under one
//! lock, so a subscriber sees every event once, none twice.

use holdfast_core::{ResourceEvent, ResourceEventKind};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;

/// How many past events `since` can reach (dockerd keeps 256; memory is cheap).
const HISTORY_MAX: usize = 1024;
/// Events a slow subscriber may fall behind before it is cut off.
const LAG_MAX: usize = 4096;

/// One event as `docker events` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventMessage {
    /// `container`, `image`, `volume` or `network`.
    pub kind: &'static str,
    pub action: String,
    pub actor_id: String,
    /// The image of a container event.
    pub from: Option<String>,
    pub attributes: BTreeMap<String, String>,
    pub time_nanos: i64,
}

impl EventMessage {
    /// dockerd's JSON shape, including the legacy `status`/`id`/`from`.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "Type": self.kind,
            "Action": self.action,
            "Actor": { "ID": self.actor_id, "Attributes": self.attributes },
            "scope": "local",
            "time": self.time_nanos.div_euclid(1_000_000_000),
            "timeNano": self.time_nanos,
        });
        if self.kind == "container" {
            v["status"] = json!(self.action);
            v["id"] = json!(self.actor_id);
            if let Some(from) = &self.from {
                v["from"] = json!(from);
            }
        }
        v
    }
}

impl EventMessage {
    /// A volume's or a network's event as dockerd words it (`local`
    /// volumes, `bridge` networks: the only drivers holdfast has).
    /// `bridge_id`: the id of the default `bridge`, which the core leaves
    /// to the network executor.
    pub fn of_resource(event: &ResourceEvent, bridge_id: &str) -> EventMessage {
        use ResourceEventKind as K;
        let pairs = |list: &[(&str, &str)]| -> BTreeMap<String, String> {
            list.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let network_id = |id: &Option<String>| id.clone().unwrap_or_else(|| bridge_id.to_owned());
        let (kind, action, actor_id, attributes) = match &event.kind {
            K::VolumeCreated { name } => (
                "volume",
                "create",
                name.clone(),
                pairs(&[("driver", "local")]),
            ),
            K::VolumeDestroyed { name } => (
                "volume",
                "destroy",
                name.clone(),
                pairs(&[("driver", "local")]),
            ),
            K::VolumeMounted {
                name,
                container,
                destination,
                read_only,
            } => {
                let read_write = if *read_only { "false" } else { "true" };
                let attributes = pairs(&[
                    ("container", container.as_str()),
                    ("destination", destination),
                    ("driver", "local"),
                    ("propagation", ""),
                    ("read/write", read_write),
                ]);
                ("volume", "mount", name.clone(), attributes)
            }
            K::VolumeUnmounted {
                name, container, ..
            } => {
                let attributes = pairs(&[("container", container.as_str()), ("driver", "local")]);
                ("volume", "unmount", name.clone(), attributes)
            }
            K::NetworkCreated { name, id } | K::NetworkDestroyed { name, id } => {
                let action = if matches!(event.kind, K::NetworkCreated { .. }) {
                    "create"
                } else {
                    "destroy"
                };
                let attributes = pairs(&[("name", name), ("type", "bridge")]);
                ("network", action, id.clone(), attributes)
            }
            K::NetworkConnected {
                name,
                id,
                container,
            }
            | K::NetworkDisconnected {
                name,
                id,
                container,
            } => {
                let action = if matches!(event.kind, K::NetworkConnected { .. }) {
                    "connect"
                } else {
                    "disconnect"
                };
                let attributes = pairs(&[
                    ("container", container.as_str()),
                    ("name", name),
                    ("type", "bridge"),
                ]);
                ("network", action, network_id(id), attributes)
            }
        };
        EventMessage {
            kind,
            action: action.to_owned(),
            actor_id,
            from: None,
            attributes,
            time_nanos: event.at.as_unix_nanos(),
        }
    }
}

#[derive(Debug)]
pub struct EventLog {
    history: Mutex<VecDeque<Arc<EventMessage>>>,
    live: broadcast::Sender<Arc<EventMessage>>,
    /// One more strong count per API listener alive.
    listeners: Arc<()>,
}

/// An API's listener of the live feed (see [`EventLog::listen`]).
#[derive(Debug)]
pub struct Listener {
    feed: broadcast::Receiver<Arc<EventMessage>>,
    _counted: Arc<()>,
}

impl Listener {
    /// The next event, or how many this listener missed by lagging.
    pub async fn recv(&mut self) -> Result<Arc<EventMessage>, broadcast::error::RecvError> {
        self.feed.recv().await
    }
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            history: Mutex::new(VecDeque::with_capacity(HISTORY_MAX)),
            live: broadcast::channel(LAG_MAX).0,
            listeners: Arc::new(()),
        }
    }
}

impl EventLog {
    pub fn publish(&self, event: EventMessage) {
        let event = Arc::new(event);
        let mut history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        if history.len() == HISTORY_MAX {
            history.pop_front();
        }
        history.push_back(Arc::clone(&event));
        // No subscriber is fine.
        let _ = self.live.send(event);
    }

    /// The live feed alone, without a copy of the history.
    pub fn live(&self) -> broadcast::Receiver<Arc<EventMessage>> {
        self.live.subscribe()
    }

    /// How many API listeners (`docker events`, the CRI's event stream)
    /// are alive now: `docker info`'s `NEventsListener`. The engine's own
    /// subscriptions are not counted.
    pub fn listeners(&self) -> usize {
        Arc::strong_count(&self.listeners) - 1
    }

    /// The history so far and the live feed from exactly where it ends,
    /// for a listener of an API, counted while it lives.
    pub fn listen(&self) -> (Vec<Arc<EventMessage>>, Listener) {
        let (history, feed) = self.subscribe();
        let listener = Listener {
            feed,
            _counted: Arc::clone(&self.listeners),
        };
        (history, listener)
    }

    /// The history so far and the live feed from exactly where it ends.
    pub fn subscribe(
        &self,
    ) -> (
        Vec<Arc<EventMessage>>,
        broadcast::Receiver<Arc<EventMessage>>,
    ) {
        let history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        (history.iter().cloned().collect(), self.live.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: i64) -> EventMessage {
        EventMessage {
            kind: "container",
            action: "die".to_owned(),
            actor_id: "abc".to_owned(),
            from: Some("busybox".to_owned()),
            attributes: [("exitCode".to_owned(), "7".to_owned())].into(),
            time_nanos: n,
        }
    }

    #[test]
    fn subscribers_get_history_then_live_events_once() {
        let log = EventLog::default();
        log.publish(event(1));
        let (past, mut live) = log.subscribe();
        log.publish(event(2));
        assert_eq!(past.len(), 1);
        assert_eq!(past[0].time_nanos, 1);
        assert_eq!(live.try_recv().map(|e| e.time_nanos).ok(), Some(2));
        assert!(live.try_recv().is_err());
    }

    #[test]
    fn history_is_bounded() {
        let log = EventLog::default();
        for n in 0..(HISTORY_MAX as i64 + 10) {
            log.publish(event(n));
        }
        let (past, _) = log.subscribe();
        assert_eq!(past.len(), HISTORY_MAX);
        assert_eq!(past[0].time_nanos, 10);
    }

    #[test]
    fn api_listeners_are_counted_while_they_live_and_the_engines_are_not() {
        let log = EventLog::default();
        let _engine_own = log.live();
        assert_eq!(log.listeners(), 0);
        let (_, first) = log.listen();
        let (_, second) = log.listen();
        assert_eq!(log.listeners(), 2);
        drop(first);
        assert_eq!(log.listeners(), 1);
        drop(second);
        assert_eq!(log.listeners(), 0);
    }

    #[test]
    fn json_has_dockers_fields() {
        let v = event(1_500_000_000).to_json();
        assert_eq!(v["status"], "die");
        assert_eq!(v["Actor"]["Attributes"]["exitCode"], "7");
        assert_eq!(v["time"], 1);
        assert_eq!(v["timeNano"], 1_500_000_000i64);
        assert_eq!(v["from"], "busybox");
    }
}
