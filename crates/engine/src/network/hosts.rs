//! A container's `/etc/hosts` (and `/etc/resolv.conf` when asked for), as
//! dockerd writes them; on a user network, a line for each peer, rewritten
//! in place as peers come, go and are renamed.

use super::attachments::Attachment;
use super::definitions::NetworkDef;
use super::{Network, other};
use holdfast_core::{ContainerConfig, ContainerId, Failure};
use std::path::{Path, PathBuf};

impl Network {
    /// The container was renamed: on a user network, its peers' hosts
    /// files name it anew.
    pub fn renamed(&self, id: &ContainerId, name: &str) -> Result<(), String> {
        let _guard = self
            .inner
            .lock
            .lock()
            .map_err(|_| "the network lock is poisoned".to_owned())?;
        for (owner, slot, mut a) in self.attachments() {
            if &owner != id {
                continue;
            }
            let Some(def) = a.network.clone().filter(NetworkDef::user_defined) else {
                continue;
            };
            let Some(first) = a.names.first_mut() else {
                continue;
            };
            name.clone_into(first);
            let path = self.attachment_path(id, slot);
            self.write_attachment(&path, &a).map_err(|f| f.message)?;
            self.refresh_peers(&def).map_err(|f| f.message)?;
        }
        Ok(())
    }

    /// Rewrites the hosts file of every container attached to `def` (a
    /// user network): its own part, then a line per container (itself
    /// included) on each user network it is on (through its own
    /// interface or an endpoint).
    pub(super) fn refresh_peers(&self, def: &NetworkDef) -> Result<(), Failure> {
        if !def.user_defined() {
            return Ok(());
        }
        let all = self.attachments();
        let on = |a: &Attachment, net: &str| a.network.as_ref().is_some_and(|n| n.id == net);
        let mut ids: Vec<&ContainerId> = all
            .iter()
            .filter(|(_, _, a)| on(a, &def.id) && a.ip.is_some())
            .map(|(id, _, _)| id)
            .collect();
        ids.dedup();
        for id in ids {
            let Some((_, _, own)) = all.iter().find(|(c, s, _)| c == id && *s == 0) else {
                continue;
            };
            if own.hosts_base.is_empty() {
                continue;
            }
            let mut text = own.hosts_base.clone();
            let nets = all
                .iter()
                .filter(|(c, _, a)| c == id && a.ip.is_some())
                .filter_map(|(_, _, a)| a.network.as_ref())
                .filter(|n| n.user_defined());
            for net in nets {
                // Its peers, and itself: dockerd's embedded DNS answers a
                // container's own name and aliases too (a compose service
                // reaches itself by its service's name).
                for (_, _, p) in &all {
                    if !on(p, &net.id) {
                        continue;
                    }
                    if let Some(ip) = p.ip {
                        let line = format!("{ip}\t{}\n", p.names.join(" "));
                        if !text.contains(&line) {
                            text.push_str(&line);
                        }
                    }
                }
            }
            let path = self.hosts_path(id);
            if path.exists() {
                rewrite_in_place(&path, &text)
                    .map_err(|e| other(format!("write {}: {e}", path.display())))?;
            }
        }
        Ok(())
    }

    /// The files bound at a bridged container's `/etc/hosts` and
    /// `/etc/resolv.conf`, where they exist (the resolver file only with
    /// `--dns` options), as `inspect` shows them.
    pub fn container_files(&self, id: &ContainerId) -> (Option<PathBuf>, Option<PathBuf>) {
        let exists = |p: PathBuf| p.exists().then_some(p);
        (exists(self.hosts_path(id)), exists(self.resolv_path(id)))
    }

    /// `<state>/hosts/<id>`: the container's `/etc/hosts`.
    pub(super) fn hosts_path(&self, id: &ContainerId) -> PathBuf {
        self.inner
            .settings
            .state_dir
            .join("hosts")
            .join(id.as_str())
    }

    /// The hosts file of a container whose namespace is made (it may be
    /// bind-mounted in a running one: rewritten in place), if it has one.
    pub(super) fn rewrite_hosts(&self, id: &ContainerId, text: &str) -> Result<(), Failure> {
        let path = self.hosts_path(id);
        if !path.exists() {
            return Ok(());
        }
        rewrite_in_place(&path, text).map_err(|e| other(format!("write {}: {e}", path.display())))
    }

    /// The container's `/etc/hosts` (its own part; peers are added by
    /// `refresh_peers`) and, when asked for, its `/etc/resolv.conf`.
    pub(super) fn write_hosts(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
        a: &Attachment,
    ) -> Result<(), Failure> {
        let text = a.hosts_base.clone();
        let path = self.hosts_path(id);
        std::fs::write(&path, text).map_err(|e| other(format!("write {}: {e}", path.display())))?;
        if config.dns.is_empty() && config.dns_search.is_empty() && config.dns_options.is_empty() {
            return Ok(());
        }
        // Without --dns, the host's name servers, as dockerd does.
        let mut servers = config.dns.clone();
        if servers.is_empty() {
            let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
            servers = host
                .lines()
                .filter_map(|l| l.strip_prefix("nameserver"))
                .map(|s| s.trim().to_owned())
                .collect();
        }
        let mut resolv = String::new();
        for s in &servers {
            resolv.push_str(&format!("nameserver {s}\n"));
        }
        if !config.dns_search.is_empty() {
            resolv.push_str(&format!("search {}\n", config.dns_search.join(" ")));
        }
        if !config.dns_options.is_empty() {
            resolv.push_str(&format!("options {}\n", config.dns_options.join(" ")));
        }
        let path = self.resolv_path(id);
        std::fs::write(&path, resolv).map_err(|e| other(format!("write {}: {e}", path.display())))
    }

    pub(super) fn resolv_path(&self, id: &ContainerId) -> PathBuf {
        self.inner
            .settings
            .state_dir
            .join("hosts")
            .join(format!("{id}.resolv.conf"))
    }
}

/// The container's own lines of its `/etc/hosts`, as dockerd writes them:
/// loopback, its address under its hostname, and `--add-host` entries.
pub(super) fn hosts_base(id: &ContainerId, config: &ContainerConfig, a: &Attachment) -> String {
    let hostname = config
        .hostname
        .clone()
        .unwrap_or_else(|| id.as_str().chars().take(12).collect());
    let mut text =
        String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    if let Some(ip) = a.ip {
        text.push_str(&format!("{ip}\t{hostname}\n"));
    }
    for h in &config.extra_hosts {
        if let Some((name, ip)) = h.split_once(':') {
            text.push_str(&format!("{ip}\t{name}\n"));
        }
    }
    text
}

/// Rewrites a hosts file that a running container has bind-mounted (so in
/// place: a new file would not be seen) without a moment where a resolver
/// reads it empty: one write at offset 0, padded with blank lines (which
/// resolvers skip) to at least the old length, so nothing is truncated.
fn rewrite_in_place(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let old_len = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
    let mut bytes = text.as_bytes().to_vec();
    if bytes.len() < old_len {
        bytes.resize(old_len, b'\n');
    }
    file.write_all_at(&bytes, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::attachments::attachment_file;
    use std::net::Ipv4Addr;

    #[test]
    fn peers_on_one_user_network_get_each_others_lines_and_no_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = super::super::network_in(dir.path());
        let def = |name: &str, id: &str| NetworkDef {
            id: id.into(),
            name: name.into(),
            bridge: format!("hf-{id}"),
            subnet: "10.8.0.0/24".into(),
            gateway: Ipv4Addr::new(10, 8, 0, 1),
            created: String::new(),
            labels: Default::default(),
            attachable: false,
        };
        let (app, other) = (def("app", "aaa"), def("other", "bbb"));
        let attach = |id: &str, on: &NetworkDef, ip: u8, names: &[&str]| {
            let id: ContainerId = id.parse().expect("id");
            let a = Attachment {
                ip: Some(Ipv4Addr::new(10, 8, 0, ip)),
                prefix_len: 24,
                network: Some(on.clone()),
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                hosts_base: format!("127.0.0.1\tlocalhost\n10.8.0.{ip}\t{id}\n"),
                ..Attachment::default()
            };
            net.write_attachment(&net.attachment_path(&id, 0), &a)
                .expect("attachment");
            std::fs::write(net.hosts_path(&id), &a.hosts_base).expect("hosts");
            id
        };
        let web = attach("web1", &app, 2, &["web", "front", "web1"]);
        let api = attach("api1", &app, 3, &["api", "api1"]);
        let far = attach("far1", &other, 4, &["far", "far1"]);
        net.refresh_peers(&app).expect("refresh");
        let hosts = |id: &ContainerId| std::fs::read_to_string(net.hosts_path(id)).expect("read");
        assert_eq!(
            hosts(&web),
            "127.0.0.1\tlocalhost\n10.8.0.2\tweb1\n10.8.0.3\tapi api1\n10.8.0.2\tweb front web1\n"
        );
        assert_eq!(
            hosts(&api),
            "127.0.0.1\tlocalhost\n10.8.0.3\tapi1\n10.8.0.3\tapi api1\n10.8.0.2\tweb front web1\n"
        );
        assert_eq!(hosts(&far), "127.0.0.1\tlocalhost\n10.8.0.4\tfar1\n");
        // the default network: no peers' lines
        net.refresh_peers(&net.inner.default.clone())
            .expect("refresh");
        // a rename reaches the peers
        net.renamed(&api, "backend").expect("rename");
        assert!(
            hosts(&web).contains("10.8.0.3\tbackend api1\n"),
            "{}",
            hosts(&web)
        );
    }

    #[test]
    fn an_endpoint_makes_peers_of_a_second_network_and_its_files_are_named_by_slot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = super::super::network_in(dir.path());
        let def = |name: &str, id: &str, net: u8| NetworkDef {
            id: id.into(),
            name: name.into(),
            bridge: format!("hf-{id}"),
            subnet: format!("10.{net}.0.0/24"),
            gateway: Ipv4Addr::new(10, net, 0, 1),
            created: String::new(),
            labels: Default::default(),
            attachable: false,
        };
        let (front, back) = (def("front", "aaa", 7), def("back", "bbb", 8));
        let attach = |id: &str, slot: u8, on: &NetworkDef, ip: Ipv4Addr, names: &[&str]| {
            let id: ContainerId = id.parse().expect("id");
            let a = Attachment {
                ip: Some(ip),
                prefix_len: 24,
                network: Some(on.clone()),
                names: names.iter().map(|n| (*n).to_owned()).collect(),
                hosts_base: if slot == 0 {
                    format!("127.0.0.1\tlocalhost\n{ip}\t{id}\n")
                } else {
                    String::new()
                },
                ..Attachment::default()
            };
            net.write_attachment(&net.attachment_path(&id, slot), &a)
                .expect("attachment");
            if slot == 0 {
                std::fs::write(net.hosts_path(&id), &a.hosts_base).expect("hosts");
            }
            id
        };
        let app = attach(
            "app1",
            0,
            &front,
            Ipv4Addr::new(10, 7, 0, 2),
            &["app", "app1"],
        );
        attach(
            "app1",
            1,
            &back,
            Ipv4Addr::new(10, 8, 0, 3),
            &["app", "api2", "app1"],
        );
        let db = attach("db1", 0, &back, Ipv4Addr::new(10, 8, 0, 2), &["db", "db1"]);
        let fe = attach("fe1", 0, &front, Ipv4Addr::new(10, 7, 0, 4), &["fe", "fe1"]);
        net.refresh_peers(&back).expect("refresh");
        let hosts = |id: &ContainerId| std::fs::read_to_string(net.hosts_path(id)).expect("read");
        // app is on both: it sees its peers on each
        assert_eq!(
            hosts(&app),
            "127.0.0.1\tlocalhost\n10.7.0.2\tapp1\n10.7.0.2\tapp app1\n10.7.0.4\tfe fe1\n10.8.0.3\tapp api2 app1\n10.8.0.2\tdb db1\n"
        );
        // db sees app by its address on back, with the endpoint's alias
        assert_eq!(
            hosts(&db),
            "127.0.0.1\tlocalhost\n10.8.0.2\tdb1\n10.8.0.3\tapp api2 app1\n10.8.0.2\tdb db1\n"
        );
        net.refresh_peers(&front).expect("refresh");
        assert_eq!(
            hosts(&fe),
            "127.0.0.1\tlocalhost\n10.7.0.4\tfe1\n10.7.0.2\tapp app1\n10.7.0.4\tfe fe1\n"
        );
        assert_eq!(
            net.attachments()
                .iter()
                .map(|(id, slot, _)| format!("{id}:{slot}"))
                .collect::<Vec<_>>(),
            ["app1:0", "app1:1", "db1:0", "fe1:0"]
        );
        assert_eq!(net.found_endpoints(&app), [1]);
        assert!(net.found_endpoints(&db).is_empty());
        assert_eq!(attachment_file("app1.eth12.json"), Some((app.clone(), 12)));
        assert_eq!(attachment_file("app1.json"), Some((app, 0)));
        assert_eq!(attachment_file("app1.tmp"), None);
        assert_eq!(attachment_file("app1.lo.json"), None);
    }

    #[test]
    fn a_hosts_file_is_rewritten_in_place_and_never_shorter() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hosts");
        std::fs::write(&path, "127.0.0.1\tlocalhost\n10.0.0.3\tpeer\n").expect("write");
        let inode =
            || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).expect("stat"));
        let before = inode();
        rewrite_in_place(&path, "127.0.0.1\tlocalhost\n").expect("rewrite");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.trim_end(), "127.0.0.1\tlocalhost");
        assert!(!text.contains("peer"), "{text:?}");
        assert_eq!(inode(), before, "the bind-mounted file itself");
        rewrite_in_place(&path, "127.0.0.1\tlocalhost\n10.0.0.4\tlonger-peer-name\n")
            .expect("rewrite");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, "127.0.0.1\tlocalhost\n10.0.0.4\tlonger-peer-name\n");
    }
}
