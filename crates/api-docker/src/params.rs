//! Query strings, parsed by hand so that every bad value is a 400 naming the
//! parameter (a typed extractor would answer in plain text).

use super::ApiError;
use axum::extract::RawQuery;
use std::collections::HashMap;

/// A query's parameters, each with every value it was given, in order.
#[derive(Debug, Default)]
pub struct Params(HashMap<String, Vec<String>>);

impl Params {
    pub fn parse(query: &RawQuery) -> Params {
        let Some(q) = &query.0 else {
            return Params::default();
        };
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for (k, v) in form_urlencoded::parse(q.as_bytes()).into_owned() {
            out.entry(k).or_default().push(v);
        }
        Params(out)
    }

    /// A parameter's first value (Go's `Form.Get`, which dockerd reads).
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.first()).map(String::as_str)
    }

    /// Every value a parameter was given (`?type=image&type=volume`).
    pub fn all(&self, key: &str) -> &[String] {
        self.0.get(key).map_or(&[], Vec::as_slice)
    }

    /// dockerd's rule: absent, empty, `0`, `no`, `false` and `none` are false.
    pub fn bool(&self, key: &str) -> bool {
        self.str(key).is_some_and(|v| {
            !matches!(
                v.to_ascii_lowercase().as_str(),
                "" | "0" | "no" | "false" | "none"
            )
        })
    }

    pub fn int<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, ApiError> {
        match self.str(key) {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!("invalid value for {key}: {v:?} is not a number"))
            }),
        }
    }

    /// `filters={"status":["exited"],"label":["a=b"]}` (also the legacy
    /// `{"status":{"exited":true}}` form).
    pub fn filters(&self) -> Result<Filters, ApiError> {
        let Some(text) = self.str("filters").filter(|t| !t.is_empty()) else {
            return Ok(Filters::default());
        };
        Filters::parse(text)
    }
}

/// Reads a raw query string (without the `?`) through every typed getter, as
/// the handlers do, for the fuzz target: each parameter as a bool and as
/// signed and unsigned integers (but `filters`), then `filters`. Returns every
/// refusal met.
pub fn decode_query(raw: &str) -> Vec<ApiError> {
    let params = Params::parse(&RawQuery(Some(raw.to_owned())));
    let mut refused = Vec::new();
    for key in params.0.keys().filter(|k| *k != "filters") {
        let _ = params.bool(key);
        refused.extend(params.int::<i64>(key).err());
        refused.extend(params.int::<u64>(key).err());
    }
    refused.extend(params.filters().err());
    refused
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Filters(HashMap<String, Vec<String>>);

impl Filters {
    pub fn parse(text: &str) -> Result<Filters, ApiError> {
        let bad = |why: String| ApiError::bad_request(format!("invalid filters: {why}"));
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let obj = value
            .as_object()
            .ok_or_else(|| bad("not a JSON object".to_owned()))?;
        let mut out = HashMap::new();
        for (key, v) in obj {
            let values: Vec<String> = match v {
                serde_json::Value::Array(items) => items
                    .iter()
                    .map(|i| {
                        i.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| bad(format!("{key}: values must be strings")))
                    })
                    .collect::<Result<_, _>>()?,
                serde_json::Value::Object(map) => map
                    .iter()
                    .filter(|(_, on)| on.as_bool() == Some(true))
                    .map(|(k, _)| k.clone())
                    .collect(),
                _ => return Err(bad(format!("{key}: want a list of strings"))),
            };
            out.insert(key.clone(), values);
        }
        Ok(Filters(out))
    }

    pub fn get(&self, key: &str) -> &[String] {
        self.0.get(key).map_or(&[], Vec::as_slice)
    }

    /// Refuses filter names this endpoint does not know, as dockerd does.
    pub fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(ApiError::bad_request(format!("invalid filter '{k}'"))),
            None => Ok(()),
        }
    }

    /// Every `label` filter (`key` or `key=value`) holds of `labels`, and
    /// no `label!` filter does (where an endpoint takes it).
    pub fn labels_match(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        let has = |l: &String| match l.split_once('=') {
            Some((k, v)) => labels.get(k).is_some_and(|have| have == v),
            None => labels.contains_key(l),
        };
        self.get("label").iter().all(has) && !self.get("label!").iter().any(has)
    }

    /// A filter with no values matches everything; else any value may match.
    pub fn any(&self, key: &str, matches: impl Fn(&str) -> bool) -> bool {
        let values = self.get(key);
        values.is_empty() || values.iter().any(|v| matches(v))
    }
}

/// Every `changes` value of a raw query string, in order (`--change` of
/// `docker commit` and `docker import`).
pub(crate) fn changes_of(query: Option<&str>) -> Vec<String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(k, v)| k == "changes" && !v.trim().is_empty())
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// `h` and `w` of a resize (a container's or an exec's terminal), both
/// required, as dockerd wants them.
pub(crate) fn terminal_size(p: &Params) -> Result<(u32, u32), ApiError> {
    let get = |key: &str| {
        p.int::<u32>(key)?
            .ok_or_else(|| ApiError::bad_request(format!("missing parameter {key}")))
    };
    Ok((get("h")?, get("w")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_every_changes_value_in_order() {
        assert_eq!(
            changes_of(Some("changes=CMD+%5B%22sh%22%5D&changes=ENV+A%3D1&repo=x")),
            ["CMD [\"sh\"]", "ENV A=1"]
        );
    }

    #[test]
    fn booleans_follow_dockerd() {
        let p = Params::parse(&RawQuery(Some("a=1&b=0&c=true&d=False&e=".to_owned())));
        assert!(p.bool("a"));
        assert!(!p.bool("b"));
        assert!(p.bool("c"));
        assert!(!p.bool("d"));
        assert!(!p.bool("e"));
        assert!(!p.bool("missing"));
    }

    #[test]
    fn numbers_are_checked() {
        let p = Params::parse(&RawQuery(Some("t=5&x=abc".to_owned())));
        assert_eq!(p.int::<u64>("t").ok().flatten(), Some(5));
        assert!(p.int::<u64>("x").is_err());
        assert_eq!(p.int::<u64>("none").ok().flatten(), None);
    }

    #[test]
    fn filters_both_forms() {
        let f = Filters::parse(r#"{"status":["exited"],"label":{"a=b":true}}"#).expect("parses");
        assert_eq!(f.get("status"), ["exited"]);
        assert_eq!(f.get("label"), ["a=b"]);
        assert!(f.only(&["status", "label"]).is_ok());
        assert!(f.only(&["status"]).is_err());
        assert!(Filters::parse("[1]").is_err());
        assert!(Filters::parse(r#"{"a":[1]}"#).is_err());
        assert!(Filters::parse("{").is_err());
    }
}
