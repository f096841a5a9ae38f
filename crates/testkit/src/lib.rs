//! Test harness: see the crate description.
