//! `GetContainerEvents`: kubelet's evented PLEG. The engine's event feed
//! (the core's `create`, `start`, `die`, `destroy`, whether an exit was
//! seen live or learned from a relist after containerd came back) as CRI
//! events of pods' containers and sandboxes, each with its pod's status
//! and its containers' statuses. A subscriber that falls behind the feed is
//! told so (`Aborted`) rather than left with a gap: kubelet then relists.

use crate::Cri;
use crate::status::status;
use futures_util::Stream;
use holdfast_core::PodRole;
use holdfast_engine::events::EventMessage;
use k8s_cri::v1 as cri;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::broadcast;
use tonic::Status;

/// What the stream remembers of the CRI's objects: the sandbox of each
/// (its own id for a sandbox), so that a removal, read when the record is
/// gone, is still told with its pod.
type Known = HashMap<String, String>;

impl Cri {
    pub(crate) async fn container_events(
        &self,
    ) -> Result<
        impl Stream<Item = Result<cri::ContainerEventResponse, Status>> + Send + 'static,
        Status,
    > {
        // Subscribed before the objects are read: nothing falls between.
        let (_, feed) = self.engine.system().events();
        let mut known = Known::new();
        for s in self.engine.containers().snapshots().await.map_err(status)? {
            if let Some(pod) = &s.record.config.pod {
                known.insert(
                    s.record.id.to_string(),
                    sandbox_of(&s.record.id.to_string(), &pod.role),
                );
            }
        }
        let state = (self.clone(), feed, known);
        Ok(futures_util::stream::unfold(
            Some(state),
            |state| async move {
                let (cri, mut feed, mut known) = state?;
                loop {
                    let event = match feed.recv().await {
                        Ok(event) => event,
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            let told = Status::aborted(format!(
                                "{missed} events were missed by this subscriber: relist"
                            ));
                            return Some((Err(told), None));
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    };
                    if let Some(response) = cri.cri_event(&event, &mut known).await {
                        return Some((Ok(response), Some((cri, feed, known))));
                    }
                }
            },
        ))
    }

    /// The CRI event a feed event is, if it is one of a pod's.
    async fn cri_event(
        &self,
        event: &Arc<EventMessage>,
        known: &mut Known,
    ) -> Option<cri::ContainerEventResponse> {
        if event.kind != "container" {
            return None;
        }
        let kind = match event.action.as_str() {
            "create" => cri::ContainerEventType::ContainerCreatedEvent,
            "start" => cri::ContainerEventType::ContainerStartedEvent,
            "die" => cri::ContainerEventType::ContainerStoppedEvent,
            "destroy" => cri::ContainerEventType::ContainerDeletedEvent,
            _ => return None,
        };
        let id = event.actor_id.clone();
        if !known.contains_key(&id) {
            let s = self.engine.containers().snapshot(&id).await.ok()?;
            let pod = s.record.config.pod.as_ref()?;
            known.insert(id.clone(), sandbox_of(&id, &pod.role));
        }
        let sandbox = known.get(&id)?.clone();
        if kind == cri::ContainerEventType::ContainerDeletedEvent {
            known.remove(&id);
        }
        // The pod as it is now, its containers' statuses with it (none
        // once it is removed).
        let pod = self.pod_sandbox_status(&sandbox).await.ok();
        let (pod_status, statuses) = match pod {
            Some(p) => (p.status, p.containers_statuses),
            None => (None, Vec::new()),
        };
        Some(cri::ContainerEventResponse {
            container_id: id,
            container_event_type: kind as i32,
            created_at: event.time_nanos,
            pod_sandbox_status: pod_status,
            containers_statuses: statuses,
        })
    }
}

fn sandbox_of(id: &str, role: &PodRole) -> String {
    match role {
        PodRole::Sandbox => id.to_owned(),
        PodRole::Container { sandbox, .. } => sandbox.clone(),
    }
}
