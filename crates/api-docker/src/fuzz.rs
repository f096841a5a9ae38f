//! The `api_requests` fuzz entry: what a client controls in a request, fed to
//! the pure decoders the handlers use, with their properties checked. The
//! cargo-fuzz target in `fuzz/` and the corpus replay test
//! (`tests/fuzz_corpus.rs`, on stable) both call [`fuzz_api_request`].
//!
//! The first byte picks the decoder (`e`, `p` or `u` exactly, else `byte % 4`,
//! so the letters `c`, `f`, `t` and `q` name them in hand-written seeds) and
//! the rest is its input:
//!
//! | byte | letter | decoder |
//! | --- | --- | --- |
//! | `e` | `e` | [`decode_exec_create`], the `POST /containers/{id}/exec` body |
//! | `p` | `p` | [`decode_pull`], a `POST /images/create` query string, then a newline and the `X-Registry-Auth` header |
//! | `u` | `u` | [`decode_push`], the image name of `POST /images/{name}/push`, a newline, its query string, a newline and the `X-Registry-Auth` header |
//! | % 4 = 3 | `c` | [`decode_create`], the `POST /containers/create` body |
//! | % 4 = 2 | `f` | [`Filters::parse`], a `filters=` value |
//! | % 4 = 0 | `t` | [`parse_client_time`], a `since=`/`until=` value |
//! | % 4 = 1 | `q` | [`decode_query`], a whole query string |
//!
//! Text inputs are taken as the HTTP layer hands them over: bytes that are
//! not UTF-8 become U+FFFD.

use crate::{
    ApiError, Filters, decode_create, decode_exec_create, decode_pull, decode_push, decode_query,
    parse_client_time,
};
use holdfast_core::{ContainerConfig, RestartPolicy};
use holdfast_engine::backend::images::{PullAuth, normalize_reference, pull_target};

/// Which decoder an input went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decoder {
    CreateBody,
    ExecBody,
    Filters,
    ClientTime,
    Query,
    Pull,
    Push,
}

/// What became of one input (every property held, or this panicked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub decoder: Decoder,
    /// Decoded (for a query string: no getter refused it).
    pub accepted: bool,
}

/// Runs one fuzz input; panics when a property fails. An empty input is an
/// empty create body.
pub fn fuzz_api_request(data: &[u8]) -> Outcome {
    let (selector, rest) = data.split_first().unwrap_or((&b'c', &[]));
    let text = || String::from_utf8_lossy(rest);
    let (decoder, accepted) = match selector % 4 {
        _ if *selector == b'e' => (Decoder::ExecBody, exec_body(rest)),
        _ if *selector == b'p' => (Decoder::Pull, pull(rest)),
        _ if *selector == b'u' => (Decoder::Push, push(rest)),
        3 => (Decoder::CreateBody, create_body(rest)),
        2 => (Decoder::Filters, filters(&text())),
        0 => (Decoder::ClientTime, client_time(&text())),
        _ => (Decoder::Query, query(&text())),
    };
    Outcome { decoder, accepted }
}

/// A refusal is the client's fault and says why.
fn check_refusal(what: &str, input: &str, e: &ApiError) {
    assert!(
        e.status.is_client_error(),
        "{what} {input:?}: refused with {} ({})",
        e.status,
        e.message
    );
    assert!(
        !e.message.trim().is_empty(),
        "{what} {input:?}: refused with an empty message"
    );
}

fn exec_body(body: &[u8]) -> bool {
    let input = String::from_utf8_lossy(body);
    match (decode_exec_create(body), decode_exec_create(body)) {
        (Err(e), Err(e2)) => {
            check_refusal("exec body", &input, &e);
            assert_eq!(
                e.message, e2.message,
                "exec body {input:?}: refused differently twice"
            );
            false
        }
        (Ok(spec), Ok(again)) => {
            assert_eq!(
                spec, again,
                "exec body {input:?}: decoded differently twice"
            );
            assert!(
                !spec.cmd.is_empty(),
                "exec body {input:?}: accepted without a command"
            );
            assert!(
                spec.working_dir.as_ref().is_none_or(|w| w.starts_with('/')),
                "exec body {input:?}: a relative working directory"
            );
            assert!(
                spec.env
                    .iter()
                    .all(|e| !e.is_empty() && !e.starts_with('=')),
                "exec body {input:?}: a nameless env entry"
            );
            true
        }
        _ => panic!("exec body {input:?}: decoded once and refused once"),
    }
}

fn create_body(body: &[u8]) -> bool {
    let input = String::from_utf8_lossy(body);
    let decoded = decode_create(body);
    let again = decode_create(body);
    match (decoded, again) {
        (Err(e), Err(e2)) => {
            check_refusal("create body", &input, &e);
            assert_eq!(
                (e.status, &e.message),
                (e2.status, &e2.message),
                "create body {input:?}: refused differently twice"
            );
            false
        }
        (Ok((config, warnings)), Ok(again)) => {
            assert_eq!(
                (&config, &warnings),
                (&again.0, &again.1),
                "create body {input:?}: decoded differently twice"
            );
            check_config(&input, &config);
            for w in &warnings {
                assert!(!w.trim().is_empty(), "create body {input:?}: empty warning");
            }
            true
        }
        (a, b) => panic!("create body {input:?}: {a:?} then {b:?}"),
    }
}

/// A decoded config holds nothing the core or the store could trip on.
fn check_config(input: &str, c: &ContainerConfig) {
    let fail = |why: &str| -> ! { panic!("create body {input:?}: {why}: {c:?}") };
    if c.image.is_empty() {
        fail("no image");
    }
    if c.stdin_once && !c.open_stdin {
        fail("StdinOnce without a stdin");
    }
    if c.image_id.is_some() || c.image_stop_signal.is_some() {
        fail("image facts, which only the daemon resolves");
    }
    if c.env.iter().any(|e| e.is_empty() || e.starts_with('=')) {
        fail("an environment entry without a name");
    }
    if c.working_dir.as_ref().is_some_and(|w| !w.starts_with('/')) {
        fail("a relative working directory");
    }
    if [&c.working_dir, &c.user, &c.hostname]
        .iter()
        .any(|o| o.as_ref().is_some_and(String::is_empty))
    {
        fail("an empty string where none means unset");
    }
    if c.mounts.iter().any(|m| {
        // A bind: an absolute host path. A volume: a valid name (or empty,
        // anonymous), its source left to the daemon.
        let source_ok = match &m.volume {
            None => m.source.starts_with('/') && !m.source.contains(':'),
            Some(v) => {
                m.source.is_empty()
                    && (v.is_empty() || holdfast_engine::volumes::validate_name(v).is_ok())
            }
        };
        !source_ok
            || !m.destination.starts_with('/')
            || m.destination == "/"
            || m.destination.contains(':')
    }) {
        fail("a mount that is neither an absolute host path nor a volume, to an absolute path");
    }
    if c.memory_limit_bytes.is_some_and(|m| m < 6 * 1024 * 1024) {
        fail("a memory limit under dockerd's 6 MB minimum");
    }
    if c.auto_remove && c.restart_policy != RestartPolicy::No {
        fail("both AutoRemove and a restart policy");
    }
    if let Err(why) = check_create_options(c) {
        fail(&why);
    }
    // What the store records reads back as the same config.
    let encoded = serde_json::to_string(c).unwrap_or_else(|e| fail(&format!("encode: {e}")));
    let decoded: ContainerConfig =
        serde_json::from_str(&encoded).unwrap_or_else(|e| fail(&format!("decode: {e}")));
    if &decoded != c {
        fail(&format!(
            "re-encoded as {encoded}, read back as {decoded:?}"
        ));
    }
}

/// The create options runc honours: checked as dockerd checks them, and
/// every accepted config makes a runtime spec.
fn check_create_options(c: &ContainerConfig) -> Result<(), String> {
    let p = &c.privileges;
    let known = |n: &String| {
        n.eq_ignore_ascii_case("ALL")
            || n.eq_ignore_ascii_case("CAP_ALL")
            || holdfast_engine::runtime_spec::capability_name(n).is_some()
    };
    if !p.cap_add.iter().chain(&p.cap_drop).all(known) {
        return Err("an unknown capability".to_owned());
    }
    if p.devices.iter().any(|d| {
        !d.path_on_host.starts_with('/')
            || !d.path_in_container.starts_with('/')
            || d.cgroup_permissions.is_empty()
            || !d.cgroup_permissions.chars().all(|c| "rwm".contains(c))
    }) {
        return Err("a device that is not absolute paths with some of rwm".to_owned());
    }
    let r = &c.resources;
    if r.ulimits.iter().any(|u| u.soft > u.hard) {
        return Err("a ulimit with soft above hard".to_owned());
    }
    if r.pids_limit.is_some_and(|l| l <= 0) {
        return Err("a pids limit that is not a limit".to_owned());
    }
    if r.nano_cpus.is_some() && (r.cpu_quota_us.is_some() || r.cpu_period_us.is_some()) {
        return Err("both --cpus and a CFS quota or period".to_owned());
    }
    if let (Some(swap), Some(memory)) = (r.memory_swap_bytes, c.memory_limit_bytes)
        && swap != -1
        && swap.unsigned_abs() < memory
    {
        return Err("swap below the memory limit".to_owned());
    }
    if r.memory_reservation_bytes
        .zip(c.memory_limit_bytes)
        .is_some_and(|(res, m)| res > m)
    {
        return Err("a reservation above the memory limit".to_owned());
    }
    if c.sysctls.keys().any(|k| {
        !(k.starts_with("net.") || k.starts_with("kernel.") || k.starts_with("fs.mqueue."))
            || k.contains("..")
            || k.contains('/')
    }) {
        return Err("a sysctl that is not namespaced".to_owned());
    }
    if c.tmpfs.keys().any(|t| !t.starts_with('/') || t == "/") {
        return Err("a tmpfs that is not on an absolute path".to_owned());
    }
    if c.cgroup_parent
        .as_ref()
        .is_some_and(|p| p.split('/').any(|s| s == ".."))
    {
        return Err("a cgroup parent that climbs out".to_owned());
    }
    let ns = &c.namespaces;
    for mode in [&ns.pid, &ns.uts, &ns.ipc] {
        if let holdfast_core::NamespaceMode::Container { id, pid } = mode
            && (id.is_empty() || *pid != 0)
        {
            return Err(
                "a container namespace resolved by the decoder (only the daemon can)".to_owned(),
            );
        }
    }
    // The spec the adapter would build, with what the daemon and the host
    // would have resolved: it builds, and it says what was asked.
    let mut resolved = c.clone();
    for mode in [
        &mut resolved.namespaces.pid,
        &mut resolved.namespaces.uts,
        &mut resolved.namespaces.ipc,
    ] {
        if let holdfast_core::NamespaceMode::Container { pid, .. } = mode {
            *pid = 1;
        }
    }
    // Volumes get their data directory from the daemon at create.
    for m in &mut resolved.mounts {
        if m.volume.is_some() && m.source.is_empty() {
            m.source = "/volume".to_owned();
        }
    }
    let host = holdfast_engine::runtime_spec::HostFacts {
        init_binary: Some("/init".into()),
        shm_source: Some("/shm".into()),
        // What the network step makes for a bridge container.
        netns_path: Some("/run/netns/x".into()),
        ..Default::default()
    };
    let image = holdfast_engine::backend::images::ImageConfig {
        cmd: Some(vec!["sh".to_owned()]),
        ..Default::default()
    };
    let id: holdfast_core::ContainerId = "0123456789ab".parse().map_err(|_| "id".to_owned())?;
    let user = holdfast_engine::runtime_spec::User { uid: 0, gid: 0 };
    // An empty command is refused when the spec is built (the image's
    // command is known only then); nothing else may be.
    let no_command = match (&c.cmd, &c.entrypoint) {
        (Some(cmd), entrypoint) => cmd.is_empty() && entrypoint.as_ref().is_none_or(Vec::is_empty),
        (None, Some(entrypoint)) => entrypoint.is_empty(),
        (None, None) => false,
    };
    let spec =
        match holdfast_engine::runtime_spec::build_spec(&id, "ns", &resolved, &image, &user, &host)
        {
            Ok(spec) => spec,
            Err(_) if no_command => return Ok(()),
            Err(e) => return Err(format!("accepted, but no spec: {e}")),
        };
    let Some(linux) = spec.linux() else {
        return Err("a spec without its linux section".to_owned());
    };
    if linux.seccomp().is_some() == p.privileged {
        return Err("seccomp on a privileged container, or off on another".to_owned());
    }
    let limit = linux
        .resources()
        .as_ref()
        .and_then(|r| *r.pids())
        .map(|p| p.limit());
    if limit != r.pids_limit {
        return Err("the pids limit is not the spec's".to_owned());
    }
    Ok(())
}

fn filters(text: &str) -> bool {
    match Filters::parse(text) {
        Err(e) => {
            check_refusal("filters", text, &e);
            false
        }
        Ok(f) => {
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v.is_object()),
                "filters {text:?}: accepted but not a JSON object"
            );
            assert_eq!(
                Filters::parse(text).ok().as_ref(),
                Some(&f),
                "filters {text:?}: parsed differently twice"
            );
            if let Err(e) = f.only(&[]) {
                check_refusal("filters", text, &e);
            }
            for key in ["status", "label", "name", "id", "reference", "dangling"] {
                assert!(
                    f.any(key, |_| true),
                    "filters {text:?}: {key} matches nothing"
                );
                let values = f.get(key);
                assert!(
                    f.any(key, |v| values.iter().any(|x| x == v)),
                    "filters {text:?}: {key} does not match its own values"
                );
            }
            true
        }
    }
}

fn client_time(text: &str) -> bool {
    // A fixed now: durations are read before it.
    let now = holdfast_core::WallTime::from_unix_nanos(1_700_000_000_000_000_000);
    let Some(t) = parse_client_time(text, now) else {
        return false;
    };
    assert_eq!(
        parse_client_time(text, now),
        Some(t),
        "client time {text:?}: parsed differently twice"
    );
    // The same instant in the CLI's own form reads back the same.
    let nanos = t.as_unix_nanos();
    if nanos >= 0 {
        let unix = format!("{}.{:09}", nanos / 1_000_000_000, nanos % 1_000_000_000);
        assert_eq!(
            parse_client_time(&unix, now),
            Some(t),
            "client time {text:?}: as {unix}"
        );
    }
    true
}

/// `query\nheader`: a pull's query string and its `X-Registry-Auth`.
fn pull(data: &[u8]) -> bool {
    let (query, header) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let query = String::from_utf8_lossy(query);
    let decoded = decode_pull(&query, header);
    let again = decode_pull(&query, header);
    let request = match (decoded, again) {
        (Err(e), Err(e2)) => {
            // An import is not a pull (it has its own handler): 501.
            if e.status != axum::http::StatusCode::NOT_IMPLEMENTED {
                check_refusal("pull", &query, &e);
            }
            assert_eq!(
                (e.status, &e.message),
                (e2.status, &e2.message),
                "pull {query:?}: refused differently twice"
            );
            return false;
        }
        (Ok(r), Ok(again)) => {
            assert_eq!(r, again, "pull {query:?}: decoded differently twice");
            r
        }
        (a, b) => panic!("pull {query:?}: {a:?} then {b:?}"),
    };
    let fail = |why: String| -> ! { panic!("pull {query:?}: {why}: {request:?}") };
    // Every tag is asked for exactly when no tag or digest is named.
    let named_last = request.reference.rsplit('/').next().unwrap_or_default();
    if request.all_tags == (named_last.contains(':') || named_last.contains('@')) {
        fail("every tag, yet a tag or digest named (or the other way)".to_owned());
    }
    // What the API accepts, the registry client can parse; the name it
    // registers is normalized once and for all, with a tag or a digest.
    let (name, registry) = pull_target(&request.reference)
        .unwrap_or_else(|e| fail(format!("accepted, but the adapter refuses it: {e}")));
    if normalize_reference(&name) != name {
        fail(format!(
            "{name} normalizes again to {}",
            normalize_reference(&name)
        ));
    }
    let last = name.rsplit('/').next().unwrap_or_default();
    if !(last.contains(':') || name.contains('@')) || registry.is_empty() {
        fail(format!("{name} lacks a tag, a digest or a registry"));
    }
    // Credentials never show in logs.
    let shown = format!("{:?}", request.auth);
    match &request.auth {
        PullAuth::Basic { username, .. } if shown != format!("Basic({username}, <secret>)") => {
            fail(format!("credentials shown as {shown}"))
        }
        PullAuth::Bearer(_) if shown != "Bearer(<secret>)" => {
            fail(format!("a token shown as {shown}"))
        }
        _ => {}
    }
    true
}

/// `name\nquery\nheader`: a push's image name, query string and
/// `X-Registry-Auth`.
fn push(data: &[u8]) -> bool {
    let mut parts = data.splitn(3, |&b| b == b'\n');
    let name = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let query = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let header = parts.next();
    let decoded = decode_push(&name, &query, header);
    let again = decode_push(&name, &query, header);
    let request = match (decoded, again) {
        (Err(e), Err(e2)) => {
            check_refusal("push", &name, &e);
            assert_eq!(
                (e.status, &e.message),
                (e2.status, &e2.message),
                "push {name:?} {query:?}: refused differently twice"
            );
            return false;
        }
        (Ok(r), Ok(again)) => {
            assert_eq!(r, again, "push {name:?}: decoded differently twice");
            r
        }
        (a, b) => panic!("push {name:?}: {a:?} then {b:?}"),
    };
    let fail = |why: String| -> ! { panic!("push {name:?} {query:?}: {why}: {request:?}") };
    // Every tag exactly when none is named.
    let named_last = request.reference.rsplit('/').next().unwrap_or_default();
    if request.all_tags == named_last.contains(':') {
        fail("every tag, yet a tag named (or the other way)".to_owned());
    }
    // What the API accepts, the registry client can parse, with a tag and
    // never a digest (a push names what it writes).
    let (normalized, registry) = pull_target(&request.reference)
        .unwrap_or_else(|e| fail(format!("accepted, but the adapter refuses it: {e}")));
    let last = normalized.rsplit('/').next().unwrap_or_default();
    if !last.contains(':') || normalized.contains('@') || registry.is_empty() {
        fail(format!(
            "{normalized} lacks a tag or a registry, or has a digest"
        ));
    }
    true
}

fn query(text: &str) -> bool {
    let refused = decode_query(text);
    for e in &refused {
        check_refusal("query", text, e);
    }
    refused.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_pick_the_decoder() {
        let push = fuzz_api_request(b"ulocalhost:5000/app\ntag=1");
        assert_eq!(push.decoder, Decoder::Push);
        assert!(push.accepted);
        let create = fuzz_api_request(br#"c{"Image":"busybox"}"#);
        assert_eq!(create.decoder, Decoder::CreateBody);
        assert!(create.accepted);
        let filters = fuzz_api_request(br#"f{"status":["exited"]}"#);
        assert_eq!(filters.decoder, Decoder::Filters);
        assert!(filters.accepted);
        let time = fuzz_api_request(b"t1700000000.5");
        assert_eq!(time.decoder, Decoder::ClientTime);
        assert!(time.accepted);
        let query = fuzz_api_request(b"qt=x&all=1");
        assert_eq!(query.decoder, Decoder::Query);
        assert!(!query.accepted, "t=x is not a number");
        assert_eq!(fuzz_api_request(b"").decoder, Decoder::CreateBody);
        let exec = fuzz_api_request(br#"e{"Cmd":["sh"],"Tty":true}"#);
        assert_eq!(
            exec,
            Outcome {
                decoder: Decoder::ExecBody,
                accepted: true
            }
        );
        let pull = fuzz_api_request(
            b"pfromImage=busybox&tag=latest\neyJ1c2VybmFtZSI6ImEiLCJwYXNzd29yZCI6ImIifQ",
        );
        assert_eq!(pull.decoder, Decoder::Pull);
        assert!(pull.accepted);
        assert!(!fuzz_api_request(b"pfromImage=Busybox").accepted);
    }
}
