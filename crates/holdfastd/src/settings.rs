//! Flags, named as dockerd names them, an optional TOML config file with the
//! same keys, and the settings resolved from both (flag > file > default).

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, clap::Parser)]
#[command(
    name = "holdfastd",
    version,
    about = "A container engine on containerd that keeps a truthful record of its containers.",
    long_about = "A container engine on containerd that keeps a truthful record of its \
containers through containerd crashes, lost events and its own restarts. Drive it with \
the ordinary docker CLI: export DOCKER_HOST=unix://<socket>.\n\n\
Without --containerd it starts (or adopts) its own containerd under --data-root and \
--exec-root. Stopping holdfastd never stops containers."
)]
pub struct Flags {
    /// Where records, logs and the embedded containerd's content live [default: /var/lib/holdfast]
    #[arg(long, value_name = "DIR")]
    pub data_root: Option<PathBuf>,
    /// Where runtime state lives: sockets, pid files [default: /run/holdfast]
    #[arg(long, value_name = "DIR")]
    pub exec_root: Option<PathBuf>,
    /// The API socket, as unix://PATH [default: unix://<exec-root>/holdfast.sock]
    #[arg(short = 'H', long = "host", value_name = "unix://PATH")]
    pub host: Option<String>,
    /// Use this external containerd socket instead of starting one
    #[arg(long, value_name = "SOCKET")]
    pub containerd: Option<PathBuf>,
    /// The containerd namespace of holdfast's containers [default: holdfast]
    #[arg(long, value_name = "NAME")]
    pub containerd_namespace: Option<String>,
    /// The containerd binary the embedded supervisor runs [default: containerd on PATH]
    #[arg(long, value_name = "PATH")]
    pub containerd_binary: Option<PathBuf>,
    /// holdfastd's pid file [default: <exec-root>/holdfastd.pid]
    #[arg(short = 'p', long, value_name = "FILE")]
    pub pidfile: Option<PathBuf>,
    /// error, warn, info, debug or trace (RUST_LOG, when set, wins) [default: info]
    #[arg(short = 'l', long, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// A TOML file with any of these settings, keys named as the flags
    #[arg(long, value_name = "FILE")]
    pub config_file: Option<PathBuf>,
    /// Grace period of a stop when neither the request nor the container names one, in seconds [default: 10]
    #[arg(long, value_name = "SECONDS")]
    pub default_stop_timeout: Option<u64>,
    /// Do not build busybox:latest from the host's static busybox when the image store lacks it
    #[arg(long)]
    pub no_seed_image: bool,
    /// A registry (host[:port]) pulled from over plain HTTP; repeat for more. Registries on loopback need none
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    pub insecure_registries: Vec<String>,
    /// The default bridge network's Linux bridge (and CNI network name), or none: no bridge network [default: holdfast0]
    #[arg(short = 'b', long = "bridge", value_name = "NAME")]
    pub bridge_name: Option<String>,
    /// The default bridge network's subnet, a.b.c.d/len [default: a private /16 no host route uses]
    #[arg(long, value_name = "CIDR")]
    pub bridge_subnet: Option<String>,
    /// Where the CNI plugins are [default: /usr/lib/cni]
    #[arg(long, value_name = "DIR")]
    pub cni_plugin_dir: Option<PathBuf>,
    /// The Kubernetes CRI socket kubelet's --container-runtime-endpoint names, as unix://PATH [default: unix://<exec-root>/cri.sock]
    #[arg(long, value_name = "unix://PATH")]
    pub cri_socket: Option<String>,
    /// Do not serve the CRI
    #[arg(long)]
    pub no_cri: bool,
    /// Where the CRI's streams (exec, attach, port-forward) are served, as HOST:PORT; port 0: a free one [default: 127.0.0.1:0]
    #[arg(long, value_name = "HOST:PORT")]
    pub cri_streaming_addr: Option<String>,
    /// Seconds a CRI stream (exec, attach, port-forward) may go without a
    /// byte either way before it is closed, as kubelet's
    /// --streaming-connection-idle-timeout; 0: never [default: 14400, 4 h]
    #[arg(long, value_name = "SECONDS")]
    pub cri_stream_idle_timeout: Option<u64>,
}

/// The config file: the same settings as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct FileSettings {
    data_root: Option<PathBuf>,
    exec_root: Option<PathBuf>,
    host: Option<String>,
    containerd: Option<PathBuf>,
    containerd_namespace: Option<String>,
    containerd_binary: Option<PathBuf>,
    pidfile: Option<PathBuf>,
    log_level: Option<String>,
    default_stop_timeout: Option<u64>,
    seed_image: Option<bool>,
    insecure_registries: Option<Vec<String>>,
    bridge: Option<String>,
    bridge_subnet: Option<String>,
    cni_plugin_dir: Option<PathBuf>,
    cri_socket: Option<String>,
    cri: Option<bool>,
    cri_streaming_addr: Option<String>,
    cri_stream_idle_timeout: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub data_root: PathBuf,
    pub exec_root: PathBuf,
    pub socket: PathBuf,
    /// `None`: start the embedded containerd.
    pub containerd: Option<PathBuf>,
    pub namespace: String,
    pub containerd_binary: PathBuf,
    pub pidfile: PathBuf,
    pub log_level: String,
    pub default_stop_timeout: Duration,
    pub seed_image: bool,
    /// Registries pulled from over plain HTTP besides those on loopback.
    pub insecure_registries: Vec<String>,
    /// `none`: no bridge network; containers default to `none`.
    pub bridge_name: String,
    pub bridge_subnet: Option<String>,
    pub cni_plugin_dir: PathBuf,
    /// Where the CRI is served; `None`: it is not.
    pub cri_socket: Option<PathBuf>,
    /// Where the CRI's streams are served.
    pub cri_streaming_addr: std::net::SocketAddr,
    /// How long a CRI stream may be idle; `None`: for ever.
    pub cri_stream_idle_timeout: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("config file {path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("-H {0}: only unix://PATH sockets are supported")]
    Host(String),
    #[error("--cri-socket {0}: only unix://PATH sockets are supported")]
    CriSocket(String),
    #[error("--cri-streaming-addr {0}: not an address HOST:PORT (an IP address and a port)")]
    CriStreamingAddr(String),
    #[error("{0} must be an absolute path")]
    Relative(PathBuf),
}

impl Settings {
    pub fn resolve(flags: Flags) -> Result<Settings, SettingsError> {
        let file = match &flags.config_file {
            Some(path) => read_file(path)?,
            None => FileSettings::default(),
        };
        let data_root = flags
            .data_root
            .or(file.data_root)
            .unwrap_or_else(|| PathBuf::from("/var/lib/holdfast"));
        let exec_root = flags
            .exec_root
            .or(file.exec_root)
            .unwrap_or_else(|| PathBuf::from("/run/holdfast"));
        let socket = match flags.host.or(file.host) {
            Some(host) => parse_host(&host)?,
            None => exec_root.join("holdfast.sock"),
        };
        let containerd = flags.containerd.or(file.containerd);
        let pidfile = flags
            .pidfile
            .or(file.pidfile)
            .unwrap_or_else(|| exec_root.join("holdfastd.pid"));
        let cri_socket = match flags.cri_socket.or(file.cri_socket) {
            Some(host) => parse_host(&host).map_err(|_| SettingsError::CriSocket(host))?,
            None => exec_root.join("cri.sock"),
        };
        for p in [&data_root, &exec_root, &socket, &pidfile, &cri_socket] {
            if !p.is_absolute() {
                return Err(SettingsError::Relative(p.clone()));
            }
        }
        let cri = !flags.no_cri && file.cri.unwrap_or(true);
        let cri_streaming_addr = match flags.cri_streaming_addr.or(file.cri_streaming_addr) {
            Some(addr) => addr
                .parse()
                .map_err(|_| SettingsError::CriStreamingAddr(addr))?,
            None => std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
        };
        Ok(Settings {
            data_root,
            exec_root,
            socket,
            containerd,
            namespace: flags
                .containerd_namespace
                .or(file.containerd_namespace)
                .unwrap_or_else(|| "holdfast".to_owned()),
            containerd_binary: flags
                .containerd_binary
                .or(file.containerd_binary)
                .unwrap_or_else(|| PathBuf::from("containerd")),
            pidfile,
            log_level: flags
                .log_level
                .or(file.log_level)
                .unwrap_or_else(|| "info".to_owned()),
            default_stop_timeout: Duration::from_secs(
                flags
                    .default_stop_timeout
                    .or(file.default_stop_timeout)
                    .unwrap_or(10),
            ),
            seed_image: !flags.no_seed_image && file.seed_image.unwrap_or(true),
            insecure_registries: if flags.insecure_registries.is_empty() {
                file.insecure_registries.unwrap_or_default()
            } else {
                flags.insecure_registries
            },
            bridge_name: flags
                .bridge_name
                .or(file.bridge)
                .unwrap_or_else(|| "holdfast0".to_owned()),
            bridge_subnet: flags.bridge_subnet.or(file.bridge_subnet),
            cni_plugin_dir: flags
                .cni_plugin_dir
                .or(file.cni_plugin_dir)
                .unwrap_or_else(|| PathBuf::from("/usr/lib/cni")),
            cri_socket: cri.then_some(cri_socket),
            cri_streaming_addr,
            cri_stream_idle_timeout: match flags
                .cri_stream_idle_timeout
                .or(file.cri_stream_idle_timeout)
                .unwrap_or(4 * 3600)
            {
                0 => None,
                secs => Some(Duration::from_secs(secs)),
            },
        })
    }
}

fn read_file(path: &Path) -> Result<FileSettings, SettingsError> {
    let err = |message: String| SettingsError::File {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    toml::from_str(&text).map_err(|e| err(e.to_string()))
}

fn parse_host(host: &str) -> Result<PathBuf, SettingsError> {
    let path = host
        .strip_prefix("unix://")
        .ok_or_else(|| SettingsError::Host(host.to_owned()))?;
    if path.is_empty() {
        return Err(SettingsError::Host(host.to_owned()));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[test]
    fn defaults_follow_the_roots() {
        let s = Settings::resolve(Flags::parse_from(["holdfastd", "--exec-root", "/x"]))
            .expect("resolves");
        assert_eq!(s.socket, PathBuf::from("/x/holdfast.sock"));
        assert_eq!(s.pidfile, PathBuf::from("/x/holdfastd.pid"));
        assert_eq!(s.data_root, PathBuf::from("/var/lib/holdfast"));
        assert_eq!(s.namespace, "holdfast");
        assert!(s.seed_image);
        assert!(s.insecure_registries.is_empty());
        assert_eq!(s.cri_socket, Some(PathBuf::from("/x/cri.sock")));
    }

    #[test]
    fn the_cri_is_served_unless_turned_off() {
        let s = Settings::resolve(Flags::parse_from([
            "holdfastd",
            "--cri-socket",
            "unix:///k/cri.sock",
        ]))
        .expect("resolves");
        assert_eq!(s.cri_socket, Some(PathBuf::from("/k/cri.sock")));
        let s = Settings::resolve(Flags::parse_from(["holdfastd", "--no-cri"])).expect("resolves");
        assert_eq!(s.cri_socket, None);
        let s = Settings::resolve(Flags::parse_from(["holdfastd"])).expect("resolves");
        assert_eq!(s.cri_streaming_addr.to_string(), "127.0.0.1:0");
        let s = Settings::resolve(Flags::parse_from([
            "holdfastd",
            "--cri-streaming-addr",
            "0.0.0.0:10010",
        ]))
        .expect("resolves");
        assert_eq!(s.cri_streaming_addr.to_string(), "0.0.0.0:10010");
        let bad = Settings::resolve(Flags::parse_from([
            "holdfastd",
            "--cri-streaming-addr",
            "localhost",
        ]));
        assert!(matches!(bad, Err(SettingsError::CriStreamingAddr(_))));
        let bad = Settings::resolve(Flags::parse_from(["holdfastd", "--cri-socket", "/k.sock"]));
        assert!(matches!(bad, Err(SettingsError::CriSocket(_))), "{bad:?}");
    }

    #[test]
    fn cri_streams_are_closed_once_idle_as_kubelets_are() {
        let idle = |args: &[&str]| {
            let mut all = vec!["holdfastd"];
            all.extend_from_slice(args);
            Settings::resolve(Flags::parse_from(all))
                .expect("resolves")
                .cri_stream_idle_timeout
        };
        assert_eq!(idle(&[]), Some(Duration::from_secs(4 * 3600)));
        assert_eq!(
            idle(&["--cri-stream-idle-timeout", "30"]),
            Some(Duration::from_secs(30))
        );
        assert_eq!(idle(&["--cri-stream-idle-timeout", "0"]), None);
    }

    #[test]
    fn insecure_registries_repeat() {
        let s = Settings::resolve(Flags::parse_from([
            "holdfastd",
            "--insecure-registry",
            "reg.lan:5000",
            "--insecure-registry",
            "10.1.2.3",
        ]))
        .expect("resolves");
        assert_eq!(s.insecure_registries, ["reg.lan:5000", "10.1.2.3"]);
    }

    #[test]
    fn hosts_must_be_unix_sockets() {
        assert!(parse_host("tcp://0.0.0.0:2375").is_err());
        assert!(parse_host("unix://").is_err());
        assert_eq!(
            parse_host("unix:///run/h.sock").ok(),
            Some(PathBuf::from("/run/h.sock"))
        );
    }

    #[test]
    fn flags_win_over_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("holdfastd.toml");
        std::fs::write(
            &file,
            "data-root = \"/from-file\"\nexec-root = \"/e\"\ndefault-stop-timeout = 3\n",
        )
        .expect("write");
        let s = Settings::resolve(Flags::parse_from([
            "holdfastd",
            "--config-file",
            file.to_str().expect("utf-8"),
            "--data-root",
            "/from-flag",
        ]))
        .expect("resolves");
        assert_eq!(s.data_root, PathBuf::from("/from-flag"));
        assert_eq!(s.exec_root, PathBuf::from("/e"));
        assert_eq!(s.default_stop_timeout, Duration::from_secs(3));
        std::fs::write(&file, "no-such-key = 1\n").expect("write");
        let bad = Settings::resolve(Flags::parse_from([
            "holdfastd",
            "--config-file",
            file.to_str().expect("utf-8"),
        ]));
        assert!(matches!(bad, Err(SettingsError::File { .. })));
    }
}
