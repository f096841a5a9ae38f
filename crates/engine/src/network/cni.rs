//! A thin invoker of our own over the CNI spec (exec the plugin with the
//! `CNI_*` environment and the config on stdin), as no well-kept Rust crate
//! invokes plugins (the published ones implement plugins, or are
//! undocumented experiments); and the chain holdfast runs on a network.

use super::attachments::{Attachment, Iface};
use super::definitions::NetworkDef;
use super::{Network, other};
use holdfast_core::{ContainerId, Failure, PortBinding};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

impl Network {
    /// The chain on `def` through `iface` (ADD, in order, each given the
    /// previous one's result), its result kept in `attachment` (and its
    /// file, after each plugin).
    pub(super) fn run_chain(
        &self,
        id: &ContainerId,
        netns: &str,
        iface: &Iface<'_>,
        def: &NetworkDef,
        path: &Path,
        attachment: &mut Attachment,
    ) -> Result<(), Failure> {
        let mut prev: Option<Value> = None;
        for plugin in self.plugins(def, &attachment.ports, Some(iface))? {
            let conf = with_prev(
                plugin.clone(),
                &def.bridge,
                prev.as_ref(),
                &attachment.ports,
            );
            let ty = conf["type"].as_str().unwrap_or_default().to_owned();
            prev = Some(self.exec(&ty, "ADD", id, &iface.ifname, netns, conf)?);
            // Recorded before the next plugin runs: a release after a crash
            // gives the later plugins (the firewall finds its rules by the
            // addresses) the result the bridge plugin gave.
            attachment.result = prev.clone();
            self.write_attachment(path, attachment)?;
        }
        if let Some(result) = &prev {
            read_result(result, attachment);
        }
        attachment.result = prev;
        Ok(())
    }

    /// The chain on `def`: the bridge (with its IPAM), the firewall's
    /// isolation of bridges, then portmap if ports are published. `iface`:
    /// at setup, the address and MAC asked for, and whether the default
    /// route goes through it (only the container's own interface's does).
    pub(super) fn plugins(
        &self,
        def: &NetworkDef,
        ports: &[PortBinding],
        iface: Option<&Iface<'_>>,
    ) -> Result<Vec<Value>, Failure> {
        let s = &self.inner.settings;
        let subnet = def.subnet()?;
        let mut bridge = json!({
            "type": "bridge",
            "bridge": def.bridge,
            "isGateway": true,
            "ipMasq": true,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": subnet.to_string(), "gateway": def.gateway.to_string()}]],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dataDir": s.state_dir.join("ipam"),
            },
        });
        if let Some(ip) = iface.and_then(|i| i.ip) {
            bridge["runtimeConfig"]["ips"] = json!([format!("{ip}/{}", subnet.prefix_len)]);
        }
        if let Some(mac) = iface.and_then(|i| i.mac) {
            bridge["runtimeConfig"]["mac"] = json!(mac);
        }
        if iface.is_some_and(|i| i.slot > 0) {
            // A second default route would be refused: an endpoint's
            // interface reaches its own subnet only.
            bridge["ipam"]["routes"] = json!([]);
        }
        // dockerd's isolation of bridge networks (DOCKER-ISOLATION): the
        // firewall plugin's per-bridge rules drop what comes from one of
        // them and leaves by another that has them too. It also accepts
        // the container's own traffic in FORWARD (CNI-FORWARD), whatever
        // the host's policy there.
        let mut plugins = vec![
            bridge,
            json!({"type": "firewall", "backend": "iptables", "ingressPolicy": "same-bridge"}),
        ];
        if !ports.is_empty() {
            plugins.push(json!({
                "type": "portmap",
                "capabilities": {"portMappings": true},
                "snat": true,
            }));
        }
        Ok(plugins)
    }

    /// Runs one plugin; its result, or its error as a failure.
    pub(super) fn exec(
        &self,
        plugin: &str,
        command: &str,
        id: &ContainerId,
        ifname: &str,
        netns: &str,
        conf: Value,
    ) -> Result<Value, Failure> {
        let s = &self.inner.settings;
        if plugin.is_empty() || plugin.contains('/') {
            return Err(other(format!("bad plugin name {plugin:?}")));
        }
        let binary = s.plugin_dir.join(plugin);
        let stdin = serde_json::to_vec(&conf).map_err(|e| other(e.to_string()))?;
        let span = tracing::debug_span!("cni", plugin, command, container_id = %id, ifname);
        let _enter = span.enter();
        let began = std::time::Instant::now();
        let mut child = Command::new(&binary)
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", id.as_str())
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", ifname)
            .env("CNI_PATH", &s.plugin_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                other(format!(
                    "run the CNI plugin {} (is containernetworking-plugins installed?): {e}",
                    binary.display()
                ))
            })?;
        if let Some(mut input) = child.stdin.take() {
            input
                .write_all(&stdin)
                .map_err(|e| other(format!("CNI plugin {plugin}: {e}")))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| other(format!("CNI plugin {plugin}: {e}")))?;
        // Where a setup's time goes (bench/network.md reads these).
        tracing::debug!(
            elapsed_us = began.elapsed().as_micros() as u64,
            ok = out.status.success(),
            "CNI plugin ran"
        );
        if !out.status.success() {
            let msg = serde_json::from_slice::<Value>(&out.stdout)
                .ok()
                .map(|v| {
                    let msg = v["msg"].as_str().unwrap_or_default();
                    let details = v["details"].as_str().unwrap_or_default();
                    format!("{msg} {details}").trim().to_owned()
                })
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| String::from_utf8_lossy(&out.stderr).trim().to_owned());
            tracing::warn!(plugin, command, %msg, "CNI plugin failed");
            return Err(other(format!("CNI plugin {plugin} {command}: {msg}")));
        }
        if out.stdout.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&out.stdout)
            .map_err(|e| other(format!("CNI plugin {plugin} answered no JSON: {e}")))
    }
}

/// A plugin's config as run in a chain: the network's name and version,
/// the previous plugin's result, and the runtime's port mappings.
pub(super) fn with_prev(
    mut plugin: Value,
    name: &str,
    prev: Option<&Value>,
    ports: &[PortBinding],
) -> Value {
    plugin["cniVersion"] = json!("1.0.0");
    // One network: every plugin of the chain names it the same (rule
    // comments and chain names derive from it).
    plugin["name"] = json!(name);
    if let Some(prev) = prev.filter(|p| !p.is_null()) {
        plugin["prevResult"] = prev.clone();
    }
    if plugin["type"] == "portmap" {
        let mappings: Vec<Value> = ports
            .iter()
            .map(|p| {
                json!({
                    "hostPort": p.host_port,
                    "containerPort": p.container_port,
                    "protocol": p.protocol,
                    "hostIP": p.host_ip,
                })
            })
            .collect();
        plugin["runtimeConfig"] = json!({ "portMappings": mappings });
    }
    plugin
}

/// The container's address, gateway and MAC from a CNI 1.0 result.
pub(super) fn read_result(result: &Value, a: &mut Attachment) {
    let Some(ip) = result["ips"].as_array().and_then(|ips| ips.first()) else {
        return;
    };
    if let Some((addr, len)) = ip["address"].as_str().and_then(|s| s.split_once('/')) {
        a.ip = addr.parse().ok();
        a.prefix_len = len.parse().unwrap_or(0);
    }
    a.gateway = ip["gateway"].as_str().and_then(|g| g.parse().ok());
    let iface = ip["interface"]
        .as_u64()
        .and_then(|i| usize::try_from(i).ok());
    a.mac = iface
        .and_then(|i| result["interfaces"].get(i))
        .and_then(|i| i["mac"].as_str())
        .map(str::to_owned);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_result_gives_address_gateway_and_mac() {
        let result = json!({
            "cniVersion": "1.0.0",
            "interfaces": [{"name": "br0", "mac": "aa"}, {"name": "eth0", "mac": "02:42:ac:11:00:02", "sandbox": "/x"}],
            "ips": [{"address": "172.17.0.2/16", "gateway": "172.17.0.1", "interface": 1}],
        });
        let mut a = Attachment::default();
        read_result(&result, &mut a);
        assert_eq!(a.ip, Some(Ipv4Addr::new(172, 17, 0, 2)));
        assert_eq!(a.prefix_len, 16);
        assert_eq!(a.gateway, Some(Ipv4Addr::new(172, 17, 0, 1)));
        assert_eq!(a.mac.as_deref(), Some("02:42:ac:11:00:02"));
    }
}
