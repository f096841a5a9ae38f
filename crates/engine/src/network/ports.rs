//! Published ports: the host port asked for if nothing holds it (another
//! attachment's mapping or a socket of the host), else one the kernel
//! calls free.

use super::attachments::Attachment;
use super::{Network, other};
use holdfast_core::{ContainerId, Failure, FailureKind, PortBinding};

impl Network {
    /// Host ports for every binding: the one asked for if nothing holds it
    /// (another attachment's mapping or a socket of the host), else a free
    /// one chosen by the kernel.
    pub(super) fn resolve_ports(
        &self,
        id: &ContainerId,
        wanted: &[PortBinding],
    ) -> Result<Vec<PortBinding>, Failure> {
        let mut held: Vec<PortBinding> = self.held_ports(id);
        let mut out = Vec::new();
        for p in wanted {
            let mut p = p.clone();
            if p.host_port == 0 {
                p.host_port = free_port(&p, &held)?;
            } else if let Some(h) = held.iter().find(|h| clashes(h, &p)) {
                return Err(in_use(
                    &p,
                    &format!("holdfast maps it to {}", h.container_port),
                ));
            } else if let Err(e) = probe_port(&p) {
                return Err(in_use(&p, &e.to_string()));
            }
            held.push(p.clone());
            out.push(p);
        }
        Ok(out)
    }

    /// Ports of every other attachment (made or being made).
    fn held_ports(&self, except: &ContainerId) -> Vec<PortBinding> {
        let dir = self.inner.settings.state_dir.join("attachments");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let own = format!("{except}.json");
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy() != own)
            .filter_map(|e| std::fs::read(e.path()).ok())
            .filter_map(|b| serde_json::from_slice::<Attachment>(&b).ok())
            .flat_map(|a| a.ports)
            .collect()
    }
}

/// The ports to name in a release with no record of the setup (a reboot
/// emptied the exec root, or the setup was cut short before writing it):
/// a host port the setup was to choose is unknown, and portmap refuses a
/// mapping of port 0 outright, so the release could never complete. Any
/// valid number serves: portmap deletes its chains by container id, and
/// only checks that each mapping is well-formed.
pub(super) fn unrecorded_ports(ports: &[PortBinding]) -> Vec<PortBinding> {
    ports
        .iter()
        .map(|p| PortBinding {
            host_port: if p.host_port == 0 {
                p.container_port
            } else {
                p.host_port
            },
            ..p.clone()
        })
        .collect()
}

fn in_use(p: &PortBinding, why: &str) -> Failure {
    let ip = if p.host_ip.is_empty() {
        "0.0.0.0"
    } else {
        &p.host_ip
    };
    Failure::new(
        FailureKind::AlreadyExists,
        format!(
            "Bind for {ip}:{} failed: port is already allocated ({why})",
            p.host_port
        ),
    )
}

fn any_ip(ip: &str) -> bool {
    ip.is_empty() || ip == "0.0.0.0"
}

fn clashes(a: &PortBinding, b: &PortBinding) -> bool {
    a.host_port == b.host_port
        && a.protocol == b.protocol
        && (any_ip(&a.host_ip) || any_ip(&b.host_ip) || a.host_ip == b.host_ip)
}

fn bind_addr(p: &PortBinding, port: u16) -> String {
    let ip = if any_ip(&p.host_ip) {
        "0.0.0.0"
    } else {
        &p.host_ip
    };
    format!("{ip}:{port}")
}

/// Whether a socket of the host holds the port (a listener, a bound UDP socket).
fn probe_port(p: &PortBinding) -> std::io::Result<u16> {
    let addr = bind_addr(p, p.host_port);
    if p.protocol == "udp" {
        Ok(std::net::UdpSocket::bind(addr)?.local_addr()?.port())
    } else {
        Ok(std::net::TcpListener::bind(addr)?.local_addr()?.port())
    }
}

/// A port the kernel calls free that no attachment holds.
fn free_port(p: &PortBinding, held: &[PortBinding]) -> Result<u16, Failure> {
    for _ in 0..32 {
        let mut probe = p.clone();
        probe.host_port = 0;
        let port = probe_port(&probe).map_err(|e| other(format!("choose a host port: {e}")))?;
        probe.host_port = port;
        if !held.iter().any(|h| clashes(h, &probe)) {
            return Ok(port);
        }
    }
    Err(other("no free host port found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_clash_on_the_same_protocol_and_overlapping_addresses() {
        let p = |ip: &str, port, proto: &str| PortBinding {
            container_port: 80,
            protocol: proto.into(),
            host_ip: ip.into(),
            host_port: port,
            by_publish_all: false,
        };
        assert!(clashes(&p("", 8080, "tcp"), &p("127.0.0.1", 8080, "tcp")));
        assert!(!clashes(&p("", 8080, "tcp"), &p("", 8080, "udp")));
        assert!(!clashes(
            &p("127.0.0.1", 8080, "tcp"),
            &p("127.0.0.2", 8080, "tcp")
        ));
        assert!(!clashes(&p("", 8080, "tcp"), &p("", 8081, "tcp")));
    }

    #[test]
    fn a_release_without_a_record_names_only_valid_host_ports() {
        let p = |container_port, host_port| PortBinding {
            container_port,
            protocol: "udp".into(),
            host_ip: String::new(),
            host_port,
            by_publish_all: false,
        };
        let ports = unrecorded_ports(&[p(53, 0), p(80, 8080)]);
        assert_eq!(ports, vec![p(53, 53), p(80, 8080)]);
    }
}
