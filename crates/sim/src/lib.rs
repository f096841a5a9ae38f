//! Deterministic simulator: see the crate description.
