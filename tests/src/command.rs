//! Running a command with a bound, so that a hung server fails a test with
//! its logs instead of hanging the suite.

use std::io::Read as _;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a bounded command produced.
#[derive(Debug)]
pub struct CommandOutput {
    /// `None` when the bound passed and the command was killed.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl CommandOutput {
    /// The exit code; -1 when killed by a signal or by the bound.
    pub fn code(&self) -> i32 {
        self.status.and_then(|s| s.code()).unwrap_or(-1)
    }

    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    pub fn timed_out(&self) -> bool {
        self.status.is_none()
    }
}

/// Runs `cmd` with stdin closed, capturing stdout and stderr; kills it when
/// it runs longer than `bound`.
pub fn run_with_timeout(cmd: &mut Command, bound: Duration) -> CommandOutput {
    run_with_input(cmd, None, bound)
}

/// As [`run_with_timeout`], with `input` on stdin (then closed) when given.
pub fn run_with_input(cmd: &mut Command, input: Option<&[u8]>, bound: Duration) -> CommandOutput {
    let started = Instant::now();
    let mut child = cmd
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        let input = input.to_vec();
        // A writer of its own: a command that does not read must not block us.
        std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = stdin.write_all(&input);
        });
    }
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err.read_to_end(&mut buf);
        buf
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > bound => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => panic!("wait for {cmd:?}: {e}"),
        }
    };
    // A killed command may leave a grandchild holding the pipes: give the
    // readers a bounded time only.
    let stdout = join_bounded(out_reader);
    let stderr = join_bounded(err_reader);
    CommandOutput {
        status,
        stdout,
        stderr,
        elapsed: started.elapsed(),
    }
}

fn join_bounded(reader: std::thread::JoinHandle<Vec<u8>>) -> String {
    let started = Instant::now();
    while !reader.is_finished() {
        if started.elapsed() > Duration::from_secs(5) {
            return "<output not closed>".to_owned();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let bytes = reader.join().unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}
