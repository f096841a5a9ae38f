//! What a container's config becomes for runc: the OCI runtime spec the
//! adapter builds when it creates the container, from the config, its
//! image's config, the user it runs as and what the host gave it (devices,
//! the init binary, its network namespace), and the capability names that
//! spec knows. Re-exported from the adapter as they are, because they are
//! pure (nothing here reaches containerd or the host) and because an API
//! checks what it accepts against them: its create decoder refuses a
//! capability the spec would not know, and is tested and fuzzed so that
//! every config it accepts builds a spec that says what was asked.

pub use holdfast_adapter_containerd::{HostDevice, HostFacts, User, build_spec, capability_name};
