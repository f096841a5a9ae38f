//! A health check as Docker's JSON writes it (`Healthcheck` of an image
//! config, of a create body, of inspect's `Config`): decoded and checked as
//! dockerd checks it, merged over the image's at create, and written back
//! (inspect, and the config of a committed image).

use holdfast_core::{ErrorKind, HealthConfig, RequestError};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

/// dockerd's smallest interval, timeout, start period and start interval.
const MIN_DURATION: Duration = Duration::from_millis(1);

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct Body {
    test: Option<Vec<String>>,
    interval: Option<i64>,
    timeout: Option<i64>,
    start_period: Option<i64>,
    start_interval: Option<i64>,
    retries: Option<i64>,
}

/// `Config.Healthcheck` of a create body (or an image config): `None` when
/// absent. Refused with 400 naming the field when dockerd refuses it.
pub fn decode(value: Option<&Value>) -> Result<Option<HealthConfig>, RequestError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let b: Body = serde_json::from_value(value.clone())
        .map_err(|e| invalid(format!("invalid Healthcheck: {e}")))?;
    let test = b.test.unwrap_or_default();
    if let Some((kind, args)) = test.split_first() {
        match kind.as_str() {
            "NONE" => {}
            "CMD" | "CMD-SHELL" if args.iter().all(String::is_empty) => {
                return Err(invalid(format!("Healthcheck.Test: {kind} needs a command")));
            }
            "CMD" | "CMD-SHELL" => {}
            other => {
                return Err(invalid(format!(
                    "Healthcheck.Test: unknown type {other:?} (expected NONE, CMD or CMD-SHELL)"
                )));
            }
        }
    }
    let duration = |name: &str, nanos: Option<i64>| -> Result<Option<Duration>, RequestError> {
        match nanos.unwrap_or(0) {
            0 => Ok(None),
            n => {
                let d = u64::try_from(n).map(Duration::from_nanos).ok();
                match d.filter(|d| *d >= MIN_DURATION) {
                    Some(d) => Ok(Some(d)),
                    None => Err(invalid(format!(
                        "{name} in Healthcheck cannot be less than 1ms"
                    ))),
                }
            }
        }
    };
    let retries = match b.retries.unwrap_or(0) {
        0 => None,
        n => Some(u32::try_from(n).map_err(|_| {
            invalid("Retries in Healthcheck cannot be negative (or that large)".to_owned())
        })?),
    };
    Ok(Some(HealthConfig {
        test,
        interval: duration("Interval", b.interval)?,
        timeout: duration("Timeout", b.timeout)?,
        start_period: duration("StartPeriod", b.start_period)?,
        start_interval: duration("StartInterval", b.start_interval)?,
        retries,
    }))
}

/// dockerd's merge at create: what the user left empty comes from the image.
pub fn merge(user: Option<HealthConfig>, image: Option<HealthConfig>) -> Option<HealthConfig> {
    let Some(image) = image else {
        return user;
    };
    let Some(mut user) = user else {
        return Some(image);
    };
    if user.test.is_empty() {
        user.test = image.test;
    }
    user.interval = user.interval.or(image.interval);
    user.timeout = user.timeout.or(image.timeout);
    user.start_period = user.start_period.or(image.start_period);
    user.start_interval = user.start_interval.or(image.start_interval);
    user.retries = user.retries.or(image.retries);
    Some(user)
}

/// The image's `Healthcheck`; one dockerd would refuse is ignored, with a log.
pub fn from_image(value: Option<&Value>) -> Option<HealthConfig> {
    decode(value).unwrap_or_else(|e| {
        tracing::warn!(error = %e.message, "the image's health check is ignored");
        None
    })
}

fn invalid(message: String) -> RequestError {
    RequestError::new(ErrorKind::Invalid, message)
}

fn nanos(d: Option<Duration>) -> u64 {
    d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// `Config.Healthcheck` as dockerd shows it (absent when none).
pub fn config_json(config: Option<&HealthConfig>) -> Value {
    let Some(c) = config else {
        return Value::Null;
    };
    let mut v = json!({ "Test": c.test });
    let mut field = |name: &str, value: u64| {
        if value != 0 {
            v[name] = json!(value);
        }
    };
    field("Interval", nanos(c.interval));
    field("Timeout", nanos(c.timeout));
    field("StartPeriod", nanos(c.start_period));
    field("StartInterval", nanos(c.start_interval));
    field("Retries", u64::from(c.retries.unwrap_or(0)));
    v
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn decoded(v: Value) -> Result<Option<HealthConfig>, RequestError> {
        decode(Some(&v))
    }

    #[test]
    fn healthchecks_are_decoded_and_checked_as_dockerd_does() {
        let c = decoded(
            json!({"Test": ["CMD-SHELL", "test -f /ok"], "Interval": 1_000_000_000i64,
            "Retries": 2}),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.test, ["CMD-SHELL", "test -f /ok"]);
        assert_eq!(c.interval, Some(Duration::from_secs(1)));
        assert_eq!(c.timeout, None);
        assert_eq!(c.retries, Some(2));
        assert_eq!(decode(None).unwrap(), None);
        assert_eq!(decoded(Value::Null).unwrap(), None);
        let none = decoded(json!({"Test": ["NONE"]})).unwrap().unwrap();
        assert_eq!(none.probe_command(), None);
        for (body, needle) in [
            (json!({"Test": ["CMD"]}), "CMD needs a command"),
            (
                json!({"Test": ["CMD-SHELL", ""]}),
                "CMD-SHELL needs a command",
            ),
            (json!({"Test": ["RUN", "x"]}), "unknown type"),
            (
                json!({"Test": ["CMD", "x"], "Interval": 5}),
                "Interval in Healthcheck cannot be less than 1ms",
            ),
            (
                json!({"Test": ["CMD", "x"], "Timeout": -1}),
                "Timeout in Healthcheck",
            ),
            (
                json!({"Test": ["CMD", "x"], "StartPeriod": 1}),
                "StartPeriod in Healthcheck",
            ),
            (
                json!({"Test": ["CMD", "x"], "Retries": -1}),
                "Retries in Healthcheck cannot be negative",
            ),
            (json!({"Test": "CMD x"}), "invalid Healthcheck"),
        ] {
            let e = decoded(body).expect_err(needle);
            assert_eq!(e.kind, ErrorKind::Invalid);
            assert!(e.message.contains(needle), "{needle}: {}", e.message);
        }
    }

    #[test]
    fn what_the_user_leaves_empty_comes_from_the_image() {
        let image = HealthConfig {
            test: vec!["CMD".into(), "true".into()],
            interval: Some(Duration::from_secs(5)),
            retries: Some(7),
            ..HealthConfig::default()
        };
        let user = HealthConfig {
            interval: Some(Duration::from_secs(1)),
            ..HealthConfig::default()
        };
        let merged = merge(Some(user), Some(image.clone())).unwrap();
        assert_eq!(merged.test, image.test);
        assert_eq!(merged.interval, Some(Duration::from_secs(1)));
        assert_eq!(merged.retries, Some(7));
        assert_eq!(merge(None, Some(image.clone())), Some(image.clone()));
        let off = HealthConfig {
            test: vec!["NONE".into()],
            ..HealthConfig::default()
        };
        let merged = merge(Some(off.clone()), Some(image)).unwrap();
        assert_eq!(
            merged.test, off.test,
            "--no-healthcheck wins over the image"
        );
        assert_eq!(merge(None, None), None);
    }

    #[test]
    fn config_shows_only_what_was_set() {
        let c = HealthConfig {
            test: vec!["CMD".into(), "true".into()],
            interval: Some(Duration::from_secs(1)),
            ..HealthConfig::default()
        };
        assert_eq!(
            config_json(Some(&c)),
            json!({"Test": ["CMD", "true"], "Interval": 1_000_000_000u64})
        );
        assert_eq!(config_json(None), Value::Null);
    }
}
