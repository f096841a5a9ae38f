//! Port keys as Docker writes them in `ExposedPorts` and `PortBindings`:
//! `80`, `80/tcp`, `53/udp`. A create body's are checked with them, and the
//! image's `EXPOSE`s merged with them at create.

use holdfast_core::{ErrorKind, PortBinding, RequestError};

/// `80`, `80/tcp`, `53/udp`.
pub fn parse_port_key(key: &str) -> Result<(u16, String), RequestError> {
    let (port, proto) = key.split_once('/').unwrap_or((key, "tcp"));
    let proto = proto.to_ascii_lowercase();
    if proto != "tcp" && proto != "udp" {
        return Err(invalid(format!(
            "invalid port {key:?}: the protocol must be tcp or udp"
        )));
    }
    let port = port.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
        invalid(format!(
            "invalid port {key:?}: a container port 1-65535 (ranges are not supported)"
        ))
    })?;
    Ok((port, proto))
}

/// `-P`: every exposed port not yet published gets a chosen host port.
pub fn publish_exposed<'a>(
    ports: &mut Vec<PortBinding>,
    exposed: impl Iterator<Item = &'a String>,
) -> Result<(), RequestError> {
    for key in exposed {
        let (container_port, protocol) = parse_port_key(key)?;
        if ports
            .iter()
            .any(|p| p.container_port == container_port && p.protocol == protocol)
        {
            continue;
        }
        ports.push(PortBinding {
            container_port,
            protocol,
            host_ip: String::new(),
            host_port: 0,
            by_publish_all: true,
        });
    }
    Ok(())
}

/// `ExposedPorts` keys as dockerd keeps them: `port/proto`, the protocol
/// `tcp` when not given, sorted, each once.
pub fn exposed_port_keys<'a>(
    keys: impl Iterator<Item = &'a String>,
) -> Result<Vec<String>, RequestError> {
    let mut out = std::collections::BTreeSet::new();
    for key in keys {
        let (port, proto) = key.split_once('/').unwrap_or((key.as_str(), "tcp"));
        let proto = proto.to_ascii_lowercase();
        if port.parse::<u16>().is_err() || !matches!(proto.as_str(), "tcp" | "udp" | "sctp") {
            return Err(invalid(format!(
                "invalid exposed port {key:?}: want PORT[/tcp|udp|sctp]"
            )));
        }
        out.insert(format!("{port}/{proto}"));
    }
    Ok(out.into_iter().collect())
}

fn invalid(message: String) -> RequestError {
    RequestError::new(ErrorKind::Invalid, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_ports_read_as_dockerd_keeps_them() {
        let keys = ["80".to_owned(), "53/UDP".into(), "80/tcp".into()];
        assert_eq!(
            exposed_port_keys(keys.iter()).expect("valid"),
            vec!["53/udp".to_owned(), "80/tcp".into()]
        );
        for bad in ["x/tcp", "80/icmp", "70000"] {
            let key = bad.to_owned();
            assert!(exposed_port_keys(std::iter::once(&key)).is_err(), "{bad}");
        }
    }
}
