//! Kubernetes' channel protocols over a WebSocket: every message carries
//! one channel's bytes, the channel named by its first byte (binary
//! protocols) or by a digit before base64 text (the `base64.` ones). For
//! exec and attach the channels are stdin 0, stdout 1, stderr 2, the
//! error channel 3 (the final status) and resize 4; `v5` adds 255, by
//! which a client says its stdin is over.

use axum::extract::ws::Message;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

pub(crate) const STDIN: u8 = 0;
pub(crate) const STDOUT: u8 = 1;
pub(crate) const STDERR: u8 = 2;
pub(crate) const ERROR: u8 = 3;
pub(crate) const RESIZE: u8 = 4;
/// `v5`: the client closes one of its channels (stdin) without closing
/// the connection.
pub(crate) const CLOSE: u8 = 255;

/// The subprotocols served, the newest first: the one a client offers
/// that comes first here is taken.
pub(crate) const PROTOCOLS: [&str; 5] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

/// How messages are framed and what the protocol version allows, from
/// the negotiated subprotocol (none: binary, as kubelet's server takes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Codec {
    base64: bool,
    /// v4 and later: the error channel carries a JSON `Status`; before, the
    /// error's text alone.
    status_json: bool,
    /// v5: channel [`CLOSE`] is understood.
    close_channel: bool,
}

impl Codec {
    pub(crate) fn of(protocol: Option<&str>) -> Codec {
        let protocol = protocol.unwrap_or("");
        Codec {
            base64: protocol.contains("base64."),
            status_json: protocol.starts_with("v4.") || protocol.starts_with("v5."),
            close_channel: protocol.starts_with("v5."),
        }
    }

    /// `data` on `channel`, as one message.
    pub(crate) fn encode(&self, channel: u8, data: &[u8]) -> Message {
        if self.base64 {
            let mut text = String::with_capacity(1 + data.len().div_ceil(3) * 4);
            text.push(char::from(b'0' + channel));
            STANDARD.encode_string(data, &mut text);
            Message::Text(text.into())
        } else {
            let mut bytes = Vec::with_capacity(1 + data.len());
            bytes.push(channel);
            bytes.extend_from_slice(data);
            Message::Binary(bytes.into())
        }
    }

    /// The channel and bytes a client's message carries; `None` for one
    /// that carries none (a ping, an empty or malformed message).
    pub(crate) fn decode(&self, message: Message) -> Option<(u8, Vec<u8>)> {
        // Text and binary frames alike, as kubelet's server reads them
        // (clients send a str as text: the Python client's stdin).
        let bytes = match message {
            Message::Binary(bytes) => bytes,
            Message::Text(text) => text.into(),
            _ => return None,
        };
        let (&first, data) = bytes.split_first()?;
        if self.base64 {
            let channel = first.checked_sub(b'0')?;
            Some((channel, STANDARD.decode(data).ok()?))
        } else {
            Some((first, data.to_vec()))
        }
    }

    /// The empty message kubelet's server sends first, on the lowest
    /// channel it writes: clients take it as the stream being up.
    pub(crate) fn ready(&self, stdout: bool, stderr: bool) -> Message {
        let channel = match (stdout, stderr) {
            (true, _) => STDOUT,
            (false, true) => STDERR,
            (false, false) => ERROR,
        };
        self.encode(channel, &[])
    }

    /// Whether a client's message on `channel` says its stdin is over.
    pub(crate) fn closes_stdin(&self, channel: u8, data: &[u8]) -> bool {
        self.close_channel && channel == CLOSE && data.first() == Some(&STDIN)
    }

    /// The error channel's last word: how the command ended (before v4,
    /// nothing at all for a success).
    pub(crate) fn status(&self, ending: &Ending) -> Option<Message> {
        let text = ending.status_text(self.status_json)?;
        Some(self.encode(ERROR, text.as_bytes()))
    }
}

/// The Close frame that ends a stream: code 1000, as kubelet's server
/// sends it (clients take any other as an error).
pub(crate) fn normal_close() -> Message {
    Message::Close(Some(axum::extract::ws::CloseFrame {
        code: axum::extract::ws::close_code::NORMAL,
        reason: "".into(),
    }))
}

/// How a stream's command ended, as the error channel tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The process exited with `code`; `what` says what ran, in kubelet's
    /// words (`error executing command [sh -c exit 3]`). An attach whose
    /// container's run ended: 0.
    Exited { code: i32, what: String },
    /// It could not be run, or its end is not known: kubelet's words too
    /// (`error executing command in container: ...`).
    Failed(String),
}

impl Ending {
    /// The error channel's text: a `Status` in JSON (v4 and later), or
    /// before v4 the message alone, and nothing for a success.
    pub(crate) fn status_text(&self, json: bool) -> Option<String> {
        if json {
            Some(self.status_json().to_string())
        } else {
            match self {
                Ending::Exited { code: 0, .. } => None,
                other => Some(other.message()),
            }
        }
    }

    fn message(&self) -> String {
        match self {
            Ending::Exited { code, what } => {
                format!("command terminated with non-zero exit code: {what}, exit code {code}")
            }
            Ending::Failed(why) => format!("Internal error occurred: {why}"),
        }
    }

    /// A Kubernetes `metav1.Status`, as clients parse the exit code out of
    /// it (`reason` NonZeroExitCode, the code as the cause `ExitCode`).
    fn status_json(&self) -> serde_json::Value {
        match self {
            Ending::Exited { code: 0, .. } => {
                serde_json::json!({"metadata": {}, "status": "Success"})
            }
            Ending::Exited { code, .. } => serde_json::json!({
                "metadata": {},
                "status": "Failure",
                "message": self.message(),
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
            }),
            Ending::Failed(why) => serde_json::json!({
                "metadata": {},
                "status": "Failure",
                "message": self.message(),
                "reason": "InternalError",
                "details": {"causes": [{"message": why}]},
                "code": 500,
            }),
        }
    }
}

/// The resize channel's bytes: JSON objects (`{"Width":80,"Height":24}`,
/// the keys in any case) one after another, an object possibly split
/// across messages. The first that does not parse ends resizing for the
/// session, as kubelet's server has it.
#[derive(Debug, Default)]
pub(crate) struct Resizes {
    pending: Vec<u8>,
    broken: bool,
}

impl Resizes {
    /// The sizes (height, width) `data` completes.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Vec<(u32, u32)> {
        if self.broken {
            return Vec::new();
        }
        self.pending.extend_from_slice(data);
        let mut sizes = Vec::new();
        let mut objects =
            serde_json::Deserializer::from_slice(&self.pending).into_iter::<serde_json::Value>();
        let mut used = 0;
        loop {
            match objects.next() {
                None => break,
                Some(Ok(v)) => {
                    used = objects.byte_offset();
                    match size(&v) {
                        Some(s) => sizes.push(s),
                        None => {
                            self.broken = true;
                            break;
                        }
                    }
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(_)) => {
                    self.broken = true;
                    break;
                }
            }
        }
        self.pending.drain(..used);
        if self.broken {
            self.pending.clear();
        }
        sizes
    }
}

fn size(v: &serde_json::Value) -> Option<(u32, u32)> {
    let dim = |want: &str| {
        let (_, n) = v
            .as_object()?
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(want))?;
        n.as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .map(u32::from)
    };
    Some((dim("height")?, dim("width")?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn binary_messages_lead_with_the_channel() {
        let codec = Codec::of(Some("v4.channel.k8s.io"));
        let m = codec.encode(STDOUT, b"hi");
        assert_eq!(m, Message::Binary(vec![1, b'h', b'i'].into()));
        assert_eq!(codec.decode(m), Some((1, b"hi".to_vec())));
        assert_eq!(codec.decode(Message::Binary(Vec::new().into())), None);
        // a text frame is read as its bytes
        assert_eq!(
            codec.decode(Message::Text("\u{0}hi".into())),
            Some((0, b"hi".to_vec()))
        );
    }

    #[test]
    fn base64_messages_lead_with_a_digit() {
        let codec = Codec::of(Some("v4.base64.channel.k8s.io"));
        let m = codec.encode(STDERR, b"hi");
        assert_eq!(m, Message::Text("2aGk=".into()));
        assert_eq!(codec.decode(m), Some((2, b"hi".to_vec())));
        assert_eq!(codec.decode(Message::Text("".into())), None);
        assert_eq!(codec.decode(Message::Text("0%%%".into())), None);
    }

    #[test]
    fn only_v5_closes_stdin_by_a_message() {
        assert!(Codec::of(Some("v5.channel.k8s.io")).closes_stdin(CLOSE, &[STDIN]));
        assert!(!Codec::of(Some("v5.channel.k8s.io")).closes_stdin(CLOSE, &[STDOUT]));
        assert!(!Codec::of(Some("v4.channel.k8s.io")).closes_stdin(CLOSE, &[STDIN]));
    }

    fn status_of(codec: Codec, ending: &Ending) -> Vec<u8> {
        let Some(status) = codec.status(ending) else {
            return Vec::new();
        };
        let (channel, data) = codec.decode(status).unwrap();
        assert_eq!(channel, ERROR);
        data
    }

    #[test]
    fn the_status_names_the_exit_code_as_clients_read_it() {
        let v4 = Codec::of(Some("v4.channel.k8s.io"));
        let exited = |code| Ending::Exited {
            code,
            what: "error executing command [sh -c exit 3]".to_owned(),
        };
        let ok: serde_json::Value = serde_json::from_slice(&status_of(v4, &exited(0))).unwrap();
        assert_eq!(ok["status"], "Success");
        let failed: serde_json::Value = serde_json::from_slice(&status_of(v4, &exited(3))).unwrap();
        assert_eq!(
            failed["message"],
            "command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3"
        );
        assert_eq!(failed["status"], "Failure");
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(failed["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(failed["details"]["causes"][0]["message"], "3");
        // Before v4, the text alone, and nothing at all for a success.
        let old = Codec::of(Some("channel.k8s.io"));
        assert_eq!(old.status(&exited(0)), None);
        assert!(
            String::from_utf8(status_of(old, &exited(3)))
                .unwrap()
                .contains("exit code 3")
        );
    }

    #[test]
    fn resizes_parse_as_clients_send_them() {
        let mut r = Resizes::default();
        assert_eq!(r.feed(b"{\"Width\":80,\"Height\":24}\n"), [(24, 80)]);
        // split across messages, two in one, the keys in any case
        assert_eq!(r.feed(b"{\"width\":100,"), []);
        assert_eq!(
            r.feed(b"\"height\":40}{\"Width\":1,\"Height\":2}"),
            [(40, 100), (2, 1)]
        );
        // the first that does not parse ends resizing
        assert_eq!(r.feed(b"junk"), []);
        assert_eq!(r.feed(b"{\"Width\":80,\"Height\":24}"), []);
        let mut r = Resizes::default();
        assert_eq!(r.feed(b"{\"Width\":70000,\"Height\":24}"), []);
        assert_eq!(r.feed(b"{\"Width\":80,\"Height\":24}"), []);
    }
}
