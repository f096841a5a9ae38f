//! The names CRI sandboxes and containers get in holdfast's one namespace
//! of names (seen in `docker ps`), in dockershim's shape so that they read
//! as kubelet's: `k8s_POD_<pod>_<namespace>_<uid>_<attempt>` for a sandbox,
//! `k8s_<container>_<pod>_<namespace>_<uid>_<attempt>` for a container.
//! The same pod and attempt asked twice gets the same name, which the core
//! refuses the second time: kubelet's `AlreadyExists`.

use crate::status::invalid;
use tonic::Status;

pub(crate) fn sandbox_name(pod: &str, namespace: &str, uid: &str, attempt: u32) -> String {
    format!("k8s_POD_{pod}_{namespace}_{uid}_{attempt}")
}

pub(crate) fn container_name(
    container: &str,
    pod: &str,
    namespace: &str,
    uid: &str,
    attempt: u32,
) -> String {
    format!("k8s_{container}_{pod}_{namespace}_{uid}_{attempt}")
}

/// A metadata field kubelet must give: non-empty, and only the characters
/// a Kubernetes name, namespace or uid has (so a name stays one name).
pub(crate) fn checked<'a>(field: &str, value: &'a str) -> Result<&'a str, Status> {
    if value.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if value.len() > 253 {
        return Err(invalid(field, "longer than 253 characters"));
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        return Err(invalid(
            field,
            format!("{value:?} has characters other than letters, digits, '-', '.' and '_'"),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_dockershim_made_them() {
        assert_eq!(
            sandbox_name("web", "default", "u1", 0),
            "k8s_POD_web_default_u1_0"
        );
        assert_eq!(
            container_name("nginx", "web", "default", "u1", 2),
            "k8s_nginx_web_default_u1_2"
        );
    }

    #[test]
    fn metadata_fields_are_checked_by_name() {
        assert!(checked("config.metadata.name", "web-1").is_ok());
        let empty = checked("config.metadata.name", "").expect_err("empty");
        assert_eq!(empty.code(), tonic::Code::InvalidArgument);
        assert!(
            empty.message().starts_with("config.metadata.name:"),
            "{}",
            empty.message()
        );
        assert!(checked("config.metadata.uid", "a/b").is_err());
        assert!(checked("config.metadata.uid", &"x".repeat(254)).is_err());
    }
}
