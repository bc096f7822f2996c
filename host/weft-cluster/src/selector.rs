//! Label and field selectors, parsed the way `kubectl -l` and
//! `--field-selector` write them.

use serde_json::Value;

use crate::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Eq(String),
    Ne(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct LabelSelector(Vec<(String, Op)>);

/// Splits at commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn set_values(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    pub(crate) fn parse(s: &str) -> Result<Self, ApiError> {
        let bad = |why: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: {why} in selector {s:?}"
            ))
        };
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let req = if let Some(k) = part.strip_prefix('!') {
                (k.trim().to_string(), Op::NotExists)
            } else if let Some((k, v)) = part.split_once("!=") {
                (k.trim().to_string(), Op::Ne(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once("==") {
                (k.trim().to_string(), Op::Eq(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once('=') {
                (k.trim().to_string(), Op::Eq(v.trim().to_string()))
            } else if let Some(idx) = part.find(" notin ") {
                let vals = set_values(&part[idx + 7..]).ok_or_else(|| bad("expected a set"))?;
                (part[..idx].trim().to_string(), Op::NotIn(vals))
            } else if let Some(idx) = part.find(" in ") {
                let vals = set_values(&part[idx + 4..]).ok_or_else(|| bad("expected a set"))?;
                (part[..idx].trim().to_string(), Op::In(vals))
            } else {
                (part.trim().to_string(), Op::Exists)
            };
            if req.0.is_empty() || req.0.contains(char::is_whitespace) {
                return Err(bad("invalid label key"));
            }
            let values: Vec<&String> = match &req.1 {
                Op::Eq(v) | Op::Ne(v) => vec![v],
                Op::In(vs) | Op::NotIn(vs) => vs.iter().collect(),
                _ => vec![],
            };
            if let Some(v) = values.into_iter().find(|v| !label_value(v)) {
                return Err(bad(&format!("invalid label value {v:?}")));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// A structured `LabelSelector` (`matchLabels`, `matchExpressions`), as
    /// webhook configurations carry it; `null` matches everything.
    pub(crate) fn from_json(v: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if let Some(labels) = v["matchLabels"].as_object() {
            for (k, val) in labels {
                let val = val
                    .as_str()
                    .ok_or(format!("matchLabels.{k}: must be a string"))?;
                reqs.push((k.clone(), Op::Eq(val.into())));
            }
        }
        for e in v["matchExpressions"].as_array().into_iter().flatten() {
            let key = e["key"].as_str().unwrap_or("").to_string();
            let values: Vec<String> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect();
            let op = match e["operator"].as_str().unwrap_or("") {
                "In" => Op::In(values),
                "NotIn" => Op::NotIn(values),
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::NotExists,
                other => {
                    return Err(format!(
                        "matchExpressions: operator {other:?} is not In, NotIn, Exists or DoesNotExist"
                    ));
                }
            };
            reqs.push((key, op));
        }
        Ok(LabelSelector(reqs))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        self.0.iter().all(|(k, op)| {
            let v = labels.get(k).and_then(Value::as_str);
            match op {
                Op::Eq(x) => v == Some(x.as_str()),
                Op::Ne(x) => v != Some(x.as_str()),
                Op::In(xs) => v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::NotIn(xs) => !v.is_some_and(|v| xs.iter().any(|x| x == v)),
                Op::Exists => v.is_some(),
                Op::NotExists => v.is_none(),
            }
        })
    }
}

/// A parsed field selector. Any dotted path into the object is accepted
/// (a real server accepts only a per-type list: `metadata.name`,
/// `metadata.namespace`, `status.phase` and `spec.nodeName` for pods,
/// `involvedObject.*` for events, ...).
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub(crate) fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            reqs.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let mut cur = obj;
            for seg in k.split('.') {
                cur = cur.get(seg).unwrap_or(&Value::Null);
            }
            let actual = match cur {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *v) == *eq
        })
    }
}

/// A label value as Kubernetes allows it: empty, or at most 63 characters of
/// `[A-Za-z0-9._-]` starting and ending with an alphanumeric.
fn label_value(v: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric();
    v.is_empty()
        || (v.len() <= 63
            && v.starts_with(ok)
            && v.ends_with(ok)
            && v.chars().all(|c| ok(c) || matches!(c, '-' | '_' | '.')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_operators() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("app in (web, api),!missing"));
        assert!(!m("tier notin (front)"));
        assert!(m("missing notin (x)"));
        assert!(!m("missing"));
    }

    #[test]
    fn field_paths() {
        let o = json!({"metadata": {"name": "a"}, "status": {"phase": "Running"}});
        let f = FieldSelector::parse("metadata.name=a,status.phase!=Failed").unwrap();
        assert!(f.matches(&o));
    }
}
