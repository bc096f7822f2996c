//! Small helpers for object metadata: timestamps, names, validation.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// RFC 3339 in UTC with second precision, as `metav1.Time` serialises.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Now, as a `metav1.Time`.
pub(crate) fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Parses what [`rfc3339`] writes (and fractional seconds / offsets `Z`).
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, se) = (n(11..13)?, n(14..16)?, n(17..19)?);
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se;
    Some(UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64))
}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_label)
}

/// Validates an object name; namespaces must be DNS labels, everything else
/// DNS subdomains (the rule most kinds use).
pub(crate) fn validate_name(name: &str, label: bool) -> Option<String> {
    let ok = if label {
        is_label(name)
    } else {
        is_subdomain(name)
    };
    if ok {
        return None;
    }
    let too_long = if label {
        name.len() > 63
    } else {
        name.len() > 253
    };
    if too_long {
        let max = if label { 63 } else { 253 };
        return Some(format!(
            "Invalid value: \"{name}\": must be no more than {max} characters"
        ));
    }
    Some(format!(
        "Invalid value: \"{name}\": {}",
        if label {
            DNS1123_LABEL_MSG
        } else {
            DNS1123_SUBDOMAIN_MSG
        }
    ))
}

fn is_qualified_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

fn valid_key(k: &str) -> bool {
    match k.split_once('/') {
        Some((prefix, name)) => is_subdomain(prefix) && is_qualified_part(name),
        None => is_qualified_part(k),
    }
}

/// Validates labels and annotations: (field, message) per problem.
pub(crate) fn validate_metadata(obj: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let meta = &obj["metadata"];
    if let Some(labels) = meta["labels"].as_object() {
        for (k, v) in labels {
            if !valid_key(k) {
                errs.push((
                    "metadata.labels".into(),
                    format!("Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                ));
            }
            match v.as_str() {
                Some(s) if s.is_empty() || is_qualified_part(s) => {}
                _ => errs.push((
                    "metadata.labels".into(),
                    format!("Invalid value: {v}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                )),
            }
        }
    }
    if let Some(ann) = meta["annotations"].as_object() {
        let mut total = 0;
        for (k, v) in ann {
            if !valid_key(k) {
                errs.push((
                    "metadata.annotations".into(),
                    format!("Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"),
                ));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > 262_144 {
            errs.push((
                "metadata.annotations".into(),
                "Too long: must have at most 262144 bytes".into(),
            ));
        }
    }
    errs
}

/// Five characters from the alphabet Kubernetes uses for generated names.
pub(crate) fn random_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHA[*b as usize % ALPHA.len()] as char)
        .collect()
}

/// The fields of `ObjectMeta`, in Go's order (which its JSON keeps);
/// anything else under `metadata` is unknown.
pub(crate) const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The strings of a JSON array (others ignored).
pub(crate) fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trip() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20Z"), Some(t));
    }

    #[test]
    fn names() {
        assert!(validate_name("a-b.c", false).is_none());
        assert!(validate_name("a-b.c", true).is_some());
        assert!(validate_name("Bad_Name", false).is_some());
    }
}
