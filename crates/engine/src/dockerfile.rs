//! `--change` of `docker commit` and `docker import`: the Dockerfile
//! instructions that set image config (CMD, ENTRYPOINT, ENV, WORKDIR, USER,
//! LABEL, EXPOSE, STOPSIGNAL), applied over the new image's config. Others
//! are refused by name. Here, beside the images they make: a commit applies
//! them over its base image's config.

use holdfast_core::{ErrorKind, RequestError};
use serde_json::{Map, Value, json};

/// Applies `changes` to `config` (the image config's `config` section, as
/// keys set over the base image's); `base_env` is what ENV adds to.
pub fn apply(
    changes: &[String],
    base_env: &[String],
    config: &mut Map<String, Value>,
) -> Result<(), RequestError> {
    for change in changes {
        let change = change.trim();
        let (word, rest) = change
            .split_once(char::is_whitespace)
            .map_or((change, ""), |(w, r)| (w, r.trim()));
        let bad = |why: &str| invalid(format!("--change {change:?}: {why}"));
        match word.to_ascii_uppercase().as_str() {
            "CMD" => {
                config.insert("Cmd".into(), json!(command(rest).map_err(|e| bad(&e))?));
            }
            "ENTRYPOINT" => {
                config.insert(
                    "Entrypoint".into(),
                    json!(command(rest).map_err(|e| bad(&e))?),
                );
            }
            "ENV" => {
                let mut env: Vec<String> = match config.get("Env") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect(),
                    _ => base_env.to_vec(),
                };
                for (k, v) in pairs(rest).map_err(|e| bad(&e))? {
                    env.retain(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k) != k);
                    env.push(format!("{k}={v}"));
                }
                config.insert("Env".into(), json!(env));
            }
            "WORKDIR" if rest.starts_with('/') => {
                config.insert("WorkingDir".into(), json!(rest));
            }
            "WORKDIR" => return Err(bad("the working directory must be an absolute path")),
            "USER" if !rest.is_empty() => {
                config.insert("User".into(), json!(rest));
            }
            "LABEL" => {
                let mut labels = match config.remove("Labels") {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                for (k, v) in pairs(rest).map_err(|e| bad(&e))? {
                    labels.insert(k, json!(v));
                }
                config.insert("Labels".into(), Value::Object(labels));
            }
            "EXPOSE" if !rest.is_empty() => {
                let mut ports = match config.remove("ExposedPorts") {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                for port in rest.split_whitespace() {
                    let (number, proto) = port.split_once('/').unwrap_or((port, "tcp"));
                    if number.parse::<u16>().is_err() || !matches!(proto, "tcp" | "udp" | "sctp") {
                        return Err(bad("a port is a number with /tcp, /udp or /sctp"));
                    }
                    ports.insert(format!("{number}/{proto}"), json!({}));
                }
                config.insert("ExposedPorts".into(), Value::Object(ports));
            }
            "STOPSIGNAL" if rest.parse::<holdfast_core::Signal>().is_ok() => {
                config.insert("StopSignal".into(), json!(rest));
            }
            "STOPSIGNAL" => return Err(bad("not a signal")),
            "USER" | "EXPOSE" => return Err(bad("a value is needed")),
            other => {
                return Err(invalid(format!(
                    "--change {other} is not supported by holdfast yet (CMD, ENTRYPOINT, ENV, WORKDIR, USER, LABEL, EXPOSE and STOPSIGNAL are)"
                )));
            }
        }
    }
    Ok(())
}

fn invalid(message: String) -> RequestError {
    RequestError::new(ErrorKind::Invalid, message)
}

/// The JSON form (`["a","b"]`) or the shell form (`a b`, run by /bin/sh -c).
fn command(rest: &str) -> Result<Vec<String>, String> {
    if rest.starts_with('[') {
        return serde_json::from_str(rest).map_err(|e| format!("not a JSON list of strings: {e}"));
    }
    if rest.is_empty() {
        return Err("a command is needed".to_owned());
    }
    Ok(vec!["/bin/sh".into(), "-c".into(), rest.into()])
}

/// `k=v k2="v 2"`, or the old `k v` form.
fn pairs(rest: &str) -> Result<Vec<(String, String)>, String> {
    if rest.is_empty() {
        return Err("a key and a value are needed".to_owned());
    }
    let first = rest.split_whitespace().next().unwrap_or("");
    if !first.contains('=') {
        let (k, v) = rest
            .split_once(char::is_whitespace)
            .ok_or("a key and a value are needed")?;
        return Ok(vec![(k.to_owned(), v.trim().to_owned())]);
    }
    let mut out = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("{key:?} is not a key=value pair"));
        }
        let mut value = String::new();
        let mut quote: Option<char> = None;
        while let Some(&c) = chars.peek() {
            match (quote, c) {
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, c) if c.is_whitespace() => break,
                (_, '\\') => {
                    chars.next();
                    if let Some(&escaped) = chars.peek() {
                        value.push(escaped);
                    }
                }
                (_, c) => value.push(c),
            }
            chars.next();
        }
        if quote.is_some() {
            return Err("an unclosed quote".to_owned());
        }
        out.push((key, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn applied(changes: &[&str]) -> Result<Value, RequestError> {
        let mut config = Map::new();
        let changes: Vec<String> = changes.iter().map(|s| (*s).to_owned()).collect();
        apply(&changes, &["PATH=/bin".to_owned()], &mut config)?;
        Ok(Value::Object(config))
    }

    #[test]
    fn instructions_set_the_config_as_a_dockerfile_would() {
        let v = applied(&[
            r#"CMD ["sh", "-c", "echo hi"]"#,
            "ENTRYPOINT /init start",
            "ENV A=1 B=\"two words\"",
            "env C 3",
            "WORKDIR /srv",
            "USER 1000:1000",
            "LABEL team=core",
            "EXPOSE 80 53/udp",
            "STOPSIGNAL SIGQUIT",
        ])
        .unwrap();
        assert_eq!(
            v,
            json!({
                "Cmd": ["sh", "-c", "echo hi"],
                "Entrypoint": ["/bin/sh", "-c", "/init start"],
                "Env": ["PATH=/bin", "A=1", "B=two words", "C=3"],
                "WorkingDir": "/srv",
                "User": "1000:1000",
                "Labels": {"team": "core"},
                "ExposedPorts": {"80/tcp": {}, "53/udp": {}},
                "StopSignal": "SIGQUIT",
            })
        );
    }

    #[test]
    fn what_it_cannot_apply_is_refused_by_name() {
        for (change, needle) in [
            ("RUN make", "--change RUN is not supported"),
            (
                "HEALTHCHECK CMD true",
                "--change HEALTHCHECK is not supported",
            ),
            ("CMD [\"unclosed\"", "not a JSON list"),
            ("WORKDIR relative", "absolute"),
            ("EXPOSE http", "a port is a number"),
            ("STOPSIGNAL SIGNOPE", "not a signal"),
            ("ENV A=\"open", "unclosed quote"),
            ("ENV", "a key and a value"),
        ] {
            let e = applied(&[change]).expect_err(change);
            assert_eq!(e.kind, ErrorKind::Invalid);
            assert!(e.message.contains(needle), "{change}: {}", e.message);
        }
    }
}
