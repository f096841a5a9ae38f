//! `docker search`: a registry's search (see the adapter's `search.rs`),
//! checked and filtered as dockerd checks and filters it.

use super::{Images, image_failure};
use crate::refusal::invalid;
use holdfast_adapter_containerd::{PullAuth, SearchResult};
use holdfast_core::RequestError;

/// How many results a search without a limit asks for (dockerd's).
const DEFAULT_LIMIT: u32 = 25;

/// dockerd's search filters: each `Some` keeps only what matches it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchFilter {
    pub official: Option<bool>,
    pub automated: Option<bool>,
    /// At least this many stars.
    pub min_stars: Option<u64>,
}

impl SearchFilter {
    fn keeps(&self, r: &SearchResult) -> bool {
        self.official.is_none_or(|o| o == r.is_official)
            && self.automated.is_none_or(|a| a == r.is_automated)
            && self.min_stars.is_none_or(|s| r.star_count >= s)
    }
}

impl Images<'_> {
    /// The repositories `term`'s registry finds for it (at most `limit`,
    /// 0 for dockerd's 25), those `filter` keeps.
    pub async fn search(
        &self,
        term: &str,
        limit: u32,
        filter: &SearchFilter,
        auth: &PullAuth,
    ) -> Result<Vec<SearchResult>, RequestError> {
        if term.contains("://") {
            return Err(invalid(format!(
                "invalid repository name: repository name ({term}) should not have a scheme"
            )));
        }
        let limit = if limit == 0 { DEFAULT_LIMIT } else { limit };
        if !(1..=100).contains(&limit) {
            return Err(invalid(format!(
                "limit {limit} is outside the range of [1, 100]"
            )));
        }
        let insecure = &self.engine.services.adapter.config().insecure_registries;
        let found = holdfast_adapter_containerd::search_registry(term, limit, auth, insecure)
            .await
            .map_err(|e| image_failure(term, e))?;
        Ok(found.into_iter().filter(|r| filter.keeps(r)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_keep_what_dockerd_keeps() {
        let found = |official, automated, stars| SearchResult {
            name: "x".into(),
            description: String::new(),
            is_official: official,
            is_automated: automated,
            star_count: stars,
        };
        let all = SearchFilter::default();
        assert!(all.keeps(&found(false, false, 0)));
        let official = SearchFilter {
            official: Some(true),
            ..SearchFilter::default()
        };
        assert!(official.keeps(&found(true, false, 0)));
        assert!(!official.keeps(&found(false, false, 0)));
        let unofficial = SearchFilter {
            official: Some(false),
            ..SearchFilter::default()
        };
        assert!(unofficial.keeps(&found(false, true, 0)));
        let starred = SearchFilter {
            min_stars: Some(3),
            automated: Some(false),
            ..SearchFilter::default()
        };
        assert!(starred.keeps(&found(false, false, 3)));
        assert!(!starred.keeps(&found(false, false, 2)));
        assert!(!starred.keeps(&found(false, true, 9)));
    }
}
