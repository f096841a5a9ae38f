//! The regressions file, replayed first.

use proptest::test_runner::{FailurePersistence, FileFailurePersistence, PersistedSeed};

pub(crate) const REGRESSIONS: &str = "proptest-regressions/properties.txt";

/// The regressions file, replayed first. `PROPTEST_REGRESSIONS=read-only`
/// replays it without adding to it: for measurement runs (cargo-mutants),
/// where a case saved under one mutant would otherwise be replayed under
/// every later one, and a false alarm saved once would "catch" them all.
pub(crate) fn regressions() -> Box<dyn FailurePersistence> {
    let file = FileFailurePersistence::Direct(REGRESSIONS);
    if std::env::var("PROPTEST_REGRESSIONS").is_ok_and(|v| v == "read-only") {
        Box::new(ReadOnly(file))
    } else {
        Box::new(file)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ReadOnly(FileFailurePersistence);

impl FailurePersistence for ReadOnly {
    fn load_persisted_failures2(&self, source_file: Option<&'static str>) -> Vec<PersistedSeed> {
        self.0.load_persisted_failures2(source_file)
    }

    fn save_persisted_failure2(
        &mut self,
        _source_file: Option<&'static str>,
        _seed: PersistedSeed,
        _shrunken_value: &dyn std::fmt::Debug,
    ) {
    }

    fn box_clone(&self) -> Box<dyn FailurePersistence> {
        Box::new(self.clone())
    }

    fn eq(&self, other: &dyn FailurePersistence) -> bool {
        other.as_any().downcast_ref::<ReadOnly>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
