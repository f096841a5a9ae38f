//! Measures the adapter against a private containerd (run as root, release):
//!
//! ```text
//! cargo run --release -p holdfast-adapter-containerd --example adapter_latency
//! ```
//!
//! - create + start: CreateContainer + CreateTask + StartTask, one container at a time;
//! - exit to input: a task's `exited_at` (stamped by the shim) to the TaskExit
//!   input reaching the sink;
//! - reconnect to relist complete with `TASKS` running tasks: containerd is
//!   SIGKILLed and restarted; from the restart (and from containerd serving)
//!   to a live stream and a complete relist.
//!
//! Prints a Markdown table; results go to bench/adapter.md by hand.

use holdfast_adapter_containerd::{Adapter, AdapterConfig};
use holdfast_core::{
    Call, ConnectionFact, ContainerConfig, ContainerId, ContainerdEvent, Done, Input, OpId,
    RelistPart, Signal,
};
use holdfast_testkit::{Containerd, busybox_image, unique_namespace};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

const SAMPLES: usize = 30;
const TASKS: usize = 100;

struct Bench {
    adapter: Adapter,
    sink: UnboundedSender<Input>,
    rx: UnboundedReceiver<Input>,
    next_op: u64,
    /// Inputs that arrived while waiting for something else.
    backlog: Vec<(Input, i64)>,
}

fn wall_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Bench {
    fn op(&mut self) -> OpId {
        self.next_op += 1;
        OpId(self.next_op)
    }

    /// Waits for an input matching `pred`; remembers every other one with its arrival time.
    async fn until(&mut self, pred: impl Fn(&Input) -> bool) -> (Input, i64) {
        if let Some(pos) = self.backlog.iter().position(|(i, _)| pred(i)) {
            return self.backlog.remove(pos);
        }
        loop {
            let input = tokio::time::timeout(Duration::from_secs(120), self.rx.recv())
                .await
                .expect("input within 120 s")
                .expect("sink open");
            let at = wall_nanos();
            if pred(&input) {
                return (input, at);
            }
            self.backlog.push((input, at));
        }
    }

    async fn call(&mut self, call: Call) -> Result<Done, holdfast_core::Failure> {
        let op = self.op();
        tokio::spawn(self.adapter.execute(op, call, self.sink.clone()));
        match self
            .until(|i| matches!(i, Input::ActionResult(o, _) if *o == op))
            .await
            .0
        {
            Input::ActionResult(_, r) => r,
            _ => unreachable!("matched an ActionResult"),
        }
    }

    async fn subscribe(&mut self) {
        let op = self.op();
        tokio::spawn(self.adapter.execute(op, Call::Subscribe, self.sink.clone()));
        let (got, _) = self
            .until(|i| {
                matches!(i, Input::Connection(ConnectionFact::StreamLive(o)) if *o == op)
                    || matches!(i, Input::ActionResult(o, _) if *o == op)
            })
            .await;
        assert!(
            matches!(got, Input::Connection(_)),
            "subscribe failed: {got:?}"
        );
    }

    /// Relists until one succeeds (containerd may still be starting); returns the task count.
    async fn relist(&mut self) -> usize {
        loop {
            let op = self.op();
            tokio::spawn(self.adapter.execute(op, Call::Relist, self.sink.clone()));
            let (got, _) = self
                .until(|i| {
                    matches!(i, Input::Relist(o, RelistPart::End) if *o == op)
                        || matches!(i, Input::ActionResult(o, _) if *o == op)
                })
                .await;
            if matches!(got, Input::Relist(..)) {
                let n = self
                    .backlog
                    .iter()
                    .filter(|(i, _)| matches!(i, Input::Relist(o, RelistPart::Task(_)) if *o == op))
                    .count();
                self.backlog
                    .retain(|(i, _)| !matches!(i, Input::Relist(o, _) if *o == op));
                return n;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn run(&mut self, id: &ContainerId, cmd: &[&str]) {
        let config = ContainerConfig {
            image: "busybox".into(),
            cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        assert_eq!(
            self.call(Call::CreateContainer {
                id: id.clone(),
                config: config.into()
            })
            .await,
            Ok(Done::Ok)
        );
        assert!(matches!(
            self.call(Call::CreateTask { id: id.clone() }).await,
            Ok(Done::TaskCreated { .. })
        ));
        assert_eq!(
            self.call(Call::StartTask { id: id.clone() }).await,
            Ok(Done::Ok)
        );
    }
}

fn stats(name: &str, mut ms: Vec<f64>) -> String {
    ms.sort_by(f64::total_cmp);
    let pick = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!(
        "| {name} | {} | {:.2} | {:.2} | {:.2} | {:.2} |",
        ms.len(),
        pick(0.5),
        pick(0.9),
        ms[0],
        ms[ms.len() - 1]
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut ctrd = Containerd::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let image = busybox_image(&dir.path().join("img"), "busybox:latest", None);
    let logger = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent()?.parent().map(|d| d.join("holdfast-logger")))
        .filter(|p| p.exists())
        .expect(
            "build the logger first: cargo build --release -p holdfast-adapter-containerd --bins",
        );
    let config = AdapterConfig::new(
        ctrd.socket(),
        unique_namespace("bench"),
        logger,
        dir.path().join("logs"),
    );
    let adapter = Adapter::new(config).expect("adapter");
    adapter
        .import_image(&image.docker_archive)
        .await
        .expect("import");
    let (sink, rx) = unbounded_channel();
    let mut b = Bench {
        adapter,
        sink,
        rx,
        next_op: 0,
        backlog: Vec::new(),
    };
    b.subscribe().await;

    // create + start, and exit to input.
    let mut create_start = Vec::new();
    let mut exit_to_input = Vec::new();
    for n in 0..SAMPLES {
        let id: ContainerId = format!("lat{n}").parse().expect("id");
        let t = Instant::now();
        b.run(&id, &["sleep", "1000"]).await;
        create_start.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            b.call(Call::Kill {
                id: id.clone(),
                signal: Signal::SIGKILL,
                all: false
            })
            .await,
            Ok(Done::Ok)
        );
        let id2 = id.clone();
        let (exit, at) = b
            .until(move |i| matches!(i, Input::Event(ContainerdEvent::TaskExit { container, .. }) if *container == id2))
            .await;
        if let Input::Event(ContainerdEvent::TaskExit { exited_at, .. }) = exit {
            exit_to_input.push((at - exited_at.as_unix_nanos()) as f64 / 1e6);
        }
        assert_eq!(
            b.call(Call::DeleteTask { id: id.clone() }).await,
            Ok(Done::Ok)
        );
        assert_eq!(b.call(Call::DeleteContainer { id }).await, Ok(Done::Ok));
    }

    // reconnect to relist complete with TASKS running tasks.
    for n in 0..TASKS {
        let id: ContainerId = format!("many{n}").parse().expect("id");
        b.run(&id, &["sleep", "1000"]).await;
    }
    assert_eq!(b.relist().await, TASKS);
    let mut from_restart = Vec::new();
    let mut from_serving = Vec::new();
    for _ in 0..5 {
        ctrd.kill();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t0 = Instant::now();
        ctrd.restart();
        let t1 = Instant::now();
        b.subscribe().await;
        let listed = b.relist().await;
        assert_eq!(listed, TASKS);
        from_restart.push(t0.elapsed().as_secs_f64() * 1e3);
        from_serving.push(t1.elapsed().as_secs_f64() * 1e3);
    }

    println!("| measurement (ms) | n | median | p90 | min | max |");
    println!("|---|---|---|---|---|---|");
    println!(
        "{}",
        stats(
            "create + start (CreateContainer + CreateTask + StartTask)",
            create_start
        )
    );
    println!(
        "{}",
        stats(
            "exit to input (shim exited_at -> TaskExit at the sink)",
            exit_to_input
        )
    );
    println!(
        "{}",
        stats(
            &format!("containerd restart -> stream live + relist of {TASKS} complete"),
            from_restart
        )
    );
    println!(
        "{}",
        stats(
            &format!("containerd serving -> stream live + relist of {TASKS} complete"),
            from_serving
        )
    );
    drop(b);
    drop(ctrd);
}
