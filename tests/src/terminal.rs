//! The docker CLI in a real pseudo-terminal, as a person runs `docker run
//! -it`: util-linux `script` (always on Debian) allocates the terminal and
//! makes it the CLI's controlling one; we type into its stdin and read the
//! screen from its stdout.

use crate::{WAIT_BOUND, poll_until};
use std::io::{Read as _, Write as _};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct Terminal {
    child: Child,
    keyboard: Option<ChildStdin>,
    screen: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', "'\\''"))
}

impl Terminal {
    /// `docker` is a docker command (program and environment) without args.
    pub(crate) fn spawn(docker: Command, args: &[&str], rows: u16, cols: u16) -> Terminal {
        let line = format!(
            "stty rows {rows} cols {cols} && exec {} {}",
            quote(&docker.get_program().to_string_lossy()),
            args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
        );
        let mut script = Command::new("script");
        for (key, value) in docker.get_envs() {
            match value {
                Some(v) => script.env(key, v),
                None => script.env_remove(key),
            };
        }
        let mut child = script
            .args([
                "--quiet",
                "--return",
                "--flush",
                "--command",
                &line,
                "/dev/null",
            ])
            .env("TERM", "xterm")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn script (util-linux)");
        let screen = Arc::new(Mutex::new(Vec::new()));
        let mut from = child.stdout.take().expect("piped stdout");
        let into = Arc::clone(&screen);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                into.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]);
            }
        });
        Terminal {
            keyboard: child.stdin.take(),
            child,
            screen,
            reader: Some(reader),
        }
    }

    /// Types `keys` (`\r` is Enter, `\x10\x11` is ctrl-p ctrl-q).
    pub fn type_keys(&mut self, keys: &str) {
        let keyboard = self.keyboard.as_mut().expect("the terminal is open");
        keyboard
            .write_all(keys.as_bytes())
            .expect("type into the terminal");
        keyboard.flush().expect("flush the terminal");
    }

    /// Everything shown so far.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Whether `text` appears on the screen within the generous bound.
    pub fn shows(&self, text: &str) -> bool {
        poll_until(WAIT_BOUND, || self.screen().contains(text))
    }

    /// Whether `text` appears on the screen at least `n` times within the bound.
    pub fn shows_times(&self, text: &str, n: usize) -> bool {
        poll_until(WAIT_BOUND, || self.screen().matches(text).count() >= n)
    }

    /// Waits (within the bound) for the CLI to exit; its status, `None` if
    /// it did not (it is then killed).
    pub fn exit(mut self) -> Option<ExitStatus> {
        let mut status = None;
        poll_until(WAIT_BOUND, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        drop(self.keyboard.take());
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        status
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
