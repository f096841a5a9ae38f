//! What a user network leaves on the host beyond its containers' own
//! rules: its bridge and its isolation rules, removed with the network.

use super::valid_bridge_name;
use std::path::Path;
use std::process::Command;

/// Deletes a user network's bridge (the bridge plugin makes it at the first
/// attachment and never removes it); none there is done.
pub(super) fn remove_bridge(bridge: &str) -> Result<(), String> {
    if !valid_bridge_name(bridge) || !Path::new("/sys/class/net").join(bridge).exists() {
        return Ok(());
    }
    let out = Command::new("ip")
        .args(["link", "delete", bridge, "type", "bridge"])
        .output()
        .map_err(|e| format!("run ip link delete {bridge} (is iproute2 installed?): {e}"))?;
    if out.status.success() || !Path::new("/sys/class/net").join(bridge).exists() {
        Ok(())
    } else {
        Err(format!(
            "ip link delete {bridge}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The firewall plugin's isolation rules name the bridge and are left when
/// its last container goes (they are the bridge's, not a container's): they
/// go with the bridge.
pub(super) fn remove_isolation_rules(bridge: &str) -> Result<(), String> {
    for chain in ISOLATION_CHAINS {
        let listed = Command::new("iptables")
            .args(["-w", "-t", "filter", "-S", chain])
            .output()
            .map_err(|e| format!("run iptables -S {chain}: {e}"))?;
        if !listed.status.success() {
            // No such chain: no network ever had a container.
            continue;
        }
        let text = String::from_utf8_lossy(&listed.stdout);
        for rule in isolation_rules_of(&text, bridge) {
            let out = Command::new("iptables")
                .args(["-w", "-t", "filter"])
                .args(&rule)
                .output()
                .map_err(|e| format!("run iptables {}: {e}", rule.join(" ")))?;
            if !out.status.success() {
                return Err(format!(
                    "iptables {}: {}",
                    rule.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    Ok(())
}

/// The firewall plugin's chains for `ingressPolicy: same-bridge`.
const ISOLATION_CHAINS: [&str; 2] = ["CNI-ISOLATION-STAGE-1", "CNI-ISOLATION-STAGE-2"];

/// The deletions (`-D chain ...` as arguments) of the rules in an
/// `iptables -S` listing whose input or output interface is `bridge`.
fn isolation_rules_of(listing: &str, bridge: &str) -> Vec<Vec<String>> {
    listing
        .lines()
        .filter_map(shlex::split)
        .filter(|args| args.first().is_some_and(|a| a == "-A"))
        .filter(|args| {
            args.windows(2)
                .any(|w| (w[0] == "-i" || w[0] == "-o") && w[1] == bridge)
        })
        .map(|mut args| {
            args[0] = "-D".to_owned();
            args
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolation_rules_of_one_bridge_are_found_with_their_quoted_comments() {
        let listing = "-N CNI-ISOLATION-STAGE-1\n\
-A CNI-ISOLATION-STAGE-1 -i hf-aaa ! -o hf-aaa -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j CNI-ISOLATION-STAGE-2\n\
-A CNI-ISOLATION-STAGE-1 -i hf-bbb ! -o hf-bbb -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j CNI-ISOLATION-STAGE-2\n\
-A CNI-ISOLATION-STAGE-1 -m comment --comment \"CNI firewall plugin rules (ingressPolicy: same-bridge)\" -j RETURN\n";
        let rules = isolation_rules_of(listing, "hf-aaa");
        assert_eq!(rules.len(), 1, "{rules:?}");
        assert_eq!(rules[0][0], "-D");
        assert_eq!(rules[0][1], "CNI-ISOLATION-STAGE-1");
        assert!(
            rules[0].contains(&"CNI firewall plugin rules (ingressPolicy: same-bridge)".to_owned())
        );
        assert!(isolation_rules_of(listing, "hf-a").is_empty());
    }
}
