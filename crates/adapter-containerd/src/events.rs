//! The event subscription: live detection by ping, decoding, and reporting a
//! broken stream as a connection fact (never as an exit).

use crate::client::{Adapter, InputSink};
use crate::decode::{decode_event, wall_time};
use crate::error::AdapterError;
use containerd_client::services::v1::{PublishRequest, SubscribeRequest};
use containerd_client::tonic::Streaming;
use containerd_client::types::Envelope;
use holdfast_core::{ConnectionFact, ContainerdEvent, Input, OpId};
use std::time::Duration;
use tokio::sync::oneshot;

/// How often the ping is published until the subscription answers.
const PING_EVERY: Duration = Duration::from_millis(50);

impl Adapter {
    pub(crate) async fn subscribe<S: InputSink>(&self, op: OpId, sink: S) {
        let (cancel_tx, mut cancelled) = oneshot::channel::<()>();
        // Dropping the previous sender cancels the previous subscription.
        if let Ok(mut current) = self.inner.subscription.lock() {
            *current = Some(cancel_tx);
        }
        let ns = self.namespace().to_owned();
        let ping_topic = format!("/holdfast/ping/{op}");
        let filters = vec![
            format!("namespace=={ns},topic~=\"^/tasks/\""),
            format!("namespace=={ns},topic==\"{ping_topic}\""),
        ];
        // No deadline on the stream itself: it lives until containerd or we end it.
        let request = self.stream_req(SubscribeRequest { filters });
        let mut client = self.events();
        let subscribing = client.subscribe(request);
        tokio::pin!(subscribing);
        let live_deadline = tokio::time::sleep(self.config().call_timeout);
        tokio::pin!(live_deadline);
        let mut ping = tokio::time::interval(PING_EVERY);

        let answered = loop {
            tokio::select! {
                r = &mut subscribing => break r,
                _ = ping.tick() => {
                    if let Err(e) = self.publish_ping(&ping_topic).await {
                        if e.is_unreachable() {
                            // containerd is gone: the subscription cannot succeed.
                            let result = self.settle::<(), _>(Err(e), &sink).map(|()| holdfast_core::Done::Ok);
                            sink.send(Input::ActionResult(op, result));
                            return;
                        }
                        tracing::debug!(error = %e, "ping not published");
                    }
                }
                _ = &mut live_deadline => {
                    let e = AdapterError::Deadline { what: "Events.Subscribe", timeout: self.config().call_timeout };
                    let result = self.settle::<holdfast_core::Done, _>(Err(e), &sink);
                    sink.send(Input::ActionResult(op, result));
                    return;
                }
                _ = &mut cancelled => {
                    let e = AdapterError::Stream("replaced by a newer subscription before it was live".into());
                    sink.send(Input::ActionResult(op, Err(holdfast_core::Failure::new(holdfast_core::FailureKind::Other, e.to_string()))));
                    return;
                }
            }
        };
        let stream = match answered {
            Ok(response) => response.into_inner(),
            Err(status) => {
                let result = self.settle::<holdfast_core::Done, _>(
                    Err(AdapterError::rpc("Events.Subscribe")(status)),
                    &sink,
                );
                sink.send(Input::ActionResult(op, result));
                return;
            }
        };
        self.note_reachable(&sink);
        tracing::info!("event stream live");
        sink.send(Input::Connection(ConnectionFact::StreamLive(op)));
        self.pump(op, stream, cancelled, &sink).await;
    }

    async fn pump<S: InputSink>(
        &self,
        op: OpId,
        mut stream: Streaming<Envelope>,
        mut cancelled: oneshot::Receiver<()>,
        sink: &S,
    ) {
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                _ = &mut cancelled => {
                    sink.send(Input::Connection(ConnectionFact::StreamBroken(op, "replaced by a newer subscription".into())));
                    return;
                }
            };
            match message {
                Ok(Some(envelope)) => self.forward(envelope, sink),
                Ok(None) => {
                    tracing::info!("event stream ended by containerd");
                    sink.send(Input::Connection(ConnectionFact::StreamBroken(
                        op,
                        "event stream ended".into(),
                    )));
                    self.probe(sink).await;
                    return;
                }
                Err(status) => {
                    let reason = format!(
                        "event stream failed: {:?}: {}",
                        status.code(),
                        status.message()
                    );
                    tracing::info!(%reason, "event stream broken");
                    sink.send(Input::Connection(ConnectionFact::StreamBroken(op, reason)));
                    self.probe(sink).await;
                    return;
                }
            }
        }
    }

    fn forward<S: InputSink>(&self, envelope: Envelope, sink: &S) {
        if !envelope.topic.starts_with("/tasks/") {
            return; // our ping, or a topic we did not ask for
        }
        let Some(any) = envelope.event else { return };
        match decode_event(&any.type_url, &any.value) {
            Ok(Some(mut event)) => {
                if let ContainerdEvent::TaskExit {
                    container,
                    exec_id,
                    pid,
                    oom_kills,
                    ..
                } = &mut event
                    && exec_id == container.as_str()
                {
                    *oom_kills = self.inner.oom.kills_since_create(container, *pid);
                }
                // The shim stamps the envelope when it first publishes, and
                // keeps the stamp through its retries: what tells a late OOM
                // or start event of an earlier run from the current run's.
                if let ContainerdEvent::TaskOom { published_at, .. }
                | ContainerdEvent::TaskStart { published_at, .. } = &mut event
                {
                    *published_at = wall_time(envelope.timestamp.as_ref());
                }
                tracing::trace!(topic = %envelope.topic, ?event, "event");
                sink.send(Input::Event(event));
            }
            Ok(None) => tracing::trace!(topic = %envelope.topic, "event not needed by the core"),
            Err(e) => {
                tracing::warn!(error = %e, topic = %envelope.topic, "undecodable event dropped")
            }
        }
    }

    async fn publish_ping(&self, topic: &str) -> Result<(), AdapterError> {
        let event = prost_types::Any {
            type_url: "holdfast.Ping".into(),
            value: Vec::new(),
        };
        let req = self.req(PublishRequest {
            topic: topic.to_owned(),
            event: Some(event),
        });
        let mut client = self.events();
        self.rpc("Events.Publish", client.publish(req)).await
    }
}
