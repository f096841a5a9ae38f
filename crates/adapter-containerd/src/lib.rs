//! containerd adapter: see the crate description.
