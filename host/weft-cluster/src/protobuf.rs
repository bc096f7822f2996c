//! Just enough of Kubernetes' protobuf encoding to accept what kubectl's
//! typed generators send (`kubectl create namespace|configmap|secret|
//! serviceaccount|quota` post `application/vnd.kubernetes.protobuf` and would
//! otherwise fail with 415), and the reviews of `kubectl auth can-i` and
//! `whoami` (access, rules, token and self-subject reviews, whole). Only
//! those kinds, and for the former only the fields those commands set, are
//! decoded; anything else answers 415 as before. Responses are always
//! JSON, which kubectl accepts.

use base64::Engine;
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\x00";

struct Reader<'a> {
    buf: &'a [u8],
}

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (b, rest) = self.buf.split_first()?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(out);
            }
        }
        None
    }

    fn next(&mut self) -> Option<Option<(u64, Field<'a>)>> {
        if self.buf.is_empty() {
            return Some(None);
        }
        let key = self.varint()?;
        let (num, wire) = (key >> 3, key & 7);
        let f = match wire {
            0 => Field::Varint(self.varint()?),
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                if len > self.buf.len() {
                    return None;
                }
                let (b, rest) = self.buf.split_at(len);
                self.buf = rest;
                Field::Bytes(b)
            }
            1 => {
                self.buf = self.buf.get(8..)?;
                Field::Varint(0)
            }
            5 => {
                self.buf = self.buf.get(4..)?;
                Field::Varint(0)
            }
            _ => return None,
        };
        Some(Some((num, f)))
    }
}

fn fields(buf: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Some(out)
}

fn string(b: &[u8]) -> Option<Value> {
    Some(Value::String(String::from_utf8(b.to_vec()).ok()?))
}

/// A map<string, string|bytes> entry.
fn entry(b: &[u8], bytes: bool) -> Option<(String, Value)> {
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (n, f) in fields(b)? {
        if let Field::Bytes(x) = f {
            match n {
                1 => k = String::from_utf8(x.to_vec()).ok()?,
                2 if bytes => v = base64::engine::general_purpose::STANDARD.encode(x).into(),
                2 => v = string(x)?,
                _ => {}
            }
        }
    }
    Some((k, v))
}

fn push_map(obj: &mut Map<String, Value>, key: &str, b: &[u8], bytes: bool) -> Option<()> {
    let (k, v) = entry(b, bytes)?;
    obj.entry(key)
        .or_insert_with(|| json!({}))
        .as_object_mut()?
        .insert(k, v);
    Some(())
}

fn push_list(obj: &mut Map<String, Value>, key: &str, v: Value) -> Option<()> {
    obj.entry(key)
        .or_insert_with(|| json!([]))
        .as_array_mut()?
        .push(v);
    Some(())
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        let Field::Bytes(x) = f else { continue };
        match n {
            1 => m.insert("name".into(), string(x)?),
            2 => m.insert("generateName".into(), string(x)?),
            3 => m.insert("namespace".into(), string(x)?),
            11 => {
                push_map(&mut m, "labels", x, false)?;
                None
            }
            12 => {
                push_map(&mut m, "annotations", x, false)?;
                None
            }
            14 => {
                push_list(&mut m, "finalizers", string(x)?)?;
                None
            }
            _ => None,
        };
    }
    Some(Value::Object(m))
}

/// A ResourceQuotaSpec's `hard` (map<string, Quantity>, a Quantity being
/// a message holding its string) and `scopes`.
fn quota_spec(b: &[u8]) -> Option<Value> {
    let mut spec = Map::new();
    for (n, f) in fields(b)? {
        let Field::Bytes(x) = f else { continue };
        match n {
            1 => {
                let (mut k, mut v) = (String::new(), Value::Null);
                for (en, ef) in fields(x)? {
                    match (en, ef) {
                        (1, Field::Bytes(y)) => k = String::from_utf8(y.to_vec()).ok()?,
                        (2, Field::Bytes(y)) => v = quantity(y)?,
                        _ => {}
                    }
                }
                let hard = spec.entry("hard").or_insert_with(|| json!({}));
                hard.as_object_mut()?.insert(k, v);
            }
            2 => push_list(&mut spec, "scopes", string(x)?)?,
            _ => {}
        }
    }
    Some(Value::Object(spec))
}

fn quantity(b: &[u8]) -> Option<Value> {
    for (n, f) in fields(b)? {
        if let (1, Field::Bytes(x)) = (n, f) {
            return string(x);
        }
    }
    Some(Value::String(String::new()))
}

/// The message's fields as JSON, by number: `(number, name, decoder)`;
/// repeated fields (and map entries) become arrays; empty strings are left
/// out, as Go's JSON leaves out these `omitempty` fields.
type FieldDecoder = fn(&[u8]) -> Option<Value>;

fn message(b: &[u8], shape: &[(u64, &str, FieldDecoder, bool)]) -> Option<Value> {
    let mut out = Map::new();
    for (n, f) in fields(b)? {
        let Field::Bytes(x) = f else { continue };
        let Some((_, name, decode, repeated)) = shape.iter().find(|(num, ..)| *num == n) else {
            continue;
        };
        let v = decode(x)?;
        if *repeated {
            push_list(&mut out, name, v)?;
        } else if v.as_str() != Some("") {
            out.insert(name.to_string(), v);
        }
    }
    Some(Value::Object(out))
}

fn selector_requirement(b: &[u8]) -> Option<Value> {
    message(
        b,
        &[
            (1, "key", string, false),
            (2, "operator", string, false),
            (3, "values", string, true),
        ],
    )
}

fn selector(b: &[u8]) -> Option<Value> {
    message(
        b,
        &[
            (1, "rawSelector", string, false),
            (2, "requirements", selector_requirement, true),
        ],
    )
}

fn resource_attributes(b: &[u8]) -> Option<Value> {
    message(
        b,
        &[
            (1, "namespace", string, false),
            (2, "verb", string, false),
            (3, "group", string, false),
            (4, "version", string, false),
            (5, "resource", string, false),
            (6, "subresource", string, false),
            (7, "name", string, false),
            (8, "fieldSelector", selector, false),
            (9, "labelSelector", selector, false),
        ],
    )
}

fn non_resource_attributes(b: &[u8]) -> Option<Value> {
    message(b, &[(1, "path", string, false), (2, "verb", string, false)])
}

/// `map<string, ExtraValue>` entries as `[key, [values]]` pairs, folded
/// into an object by [`fold_extra`].
fn extra_entry(b: &[u8]) -> Option<Value> {
    let (mut k, mut vs) = (String::new(), Vec::new());
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = String::from_utf8(x.to_vec()).ok()?,
            (2, Field::Bytes(x)) => {
                for (vn, vf) in fields(x)? {
                    if let (1, Field::Bytes(y)) = (vn, vf) {
                        vs.push(string(y)?);
                    }
                }
            }
            _ => {}
        }
    }
    Some(json!([k, vs]))
}

fn fold_extra(spec: &mut Value) {
    if let Some(Value::Array(entries)) = spec.as_object_mut().and_then(|m| m.remove("extra")) {
        let extra: Map<String, Value> = entries
            .into_iter()
            .filter_map(|e| Some((e[0].as_str()?.to_string(), e[1].clone())))
            .collect();
        spec["extra"] = Value::Object(extra);
    }
}

fn sar_spec(b: &[u8]) -> Option<Value> {
    let mut spec = message(
        b,
        &[
            (1, "resourceAttributes", resource_attributes, false),
            (2, "nonResourceAttributes", non_resource_attributes, false),
            (3, "user", string, false),
            (4, "groups", string, true),
            (5, "extra", extra_entry, true),
            (6, "uid", string, false),
        ],
    )?;
    fold_extra(&mut spec);
    Some(spec)
}

fn self_sar_spec(b: &[u8]) -> Option<Value> {
    message(
        b,
        &[
            (1, "resourceAttributes", resource_attributes, false),
            (2, "nonResourceAttributes", non_resource_attributes, false),
        ],
    )
}

fn rules_review_spec(b: &[u8]) -> Option<Value> {
    message(b, &[(1, "namespace", string, false)])
}

fn token_review_spec(b: &[u8]) -> Option<Value> {
    message(
        b,
        &[(1, "token", string, false), (2, "audiences", string, true)],
    )
}

/// The spec decoder of a review kind (its status is the server's to
/// fill, and is not read); `None` for other kinds.
fn review_spec(api_version: &str, kind: &str) -> Option<Option<FieldDecoder>> {
    Some(match (api_version, kind) {
        ("authorization.k8s.io/v1", "SubjectAccessReview" | "LocalSubjectAccessReview") => {
            Some(sar_spec)
        }
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => Some(self_sar_spec),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => Some(rules_review_spec),
        ("authentication.k8s.io/v1", "TokenReview") => Some(token_review_spec),
        ("authentication.k8s.io/v1", "SelfSubjectReview") => None,
        _ => return None,
    })
}

/// Decodes a protobuf request body into the JSON object it stands for,
/// for the kinds listed in the module docs.
pub(crate) fn decode(body: &[u8]) -> Option<Value> {
    let rest = body.strip_prefix(MAGIC)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest)? {
        let Field::Bytes(x) = f else { continue };
        match n {
            1 => {
                for (tn, tf) in fields(x)? {
                    if let Field::Bytes(y) = tf {
                        let s = String::from_utf8(y.to_vec()).ok()?;
                        if tn == 1 {
                            api_version = s;
                        } else if tn == 2 {
                            kind = s;
                        }
                    }
                }
            }
            2 => raw = x,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), api_version.clone().into());
    obj.insert("kind".into(), kind.clone().into());
    if let Some(spec) = review_spec(&api_version, &kind) {
        for (n, f) in fields(raw)? {
            match (n, f, spec) {
                (1, Field::Bytes(x), _) => {
                    obj.insert("metadata".into(), object_meta(x)?);
                }
                (2, Field::Bytes(x), Some(decode)) => {
                    obj.insert("spec".into(), decode(x)?);
                }
                _ => {}
            }
        }
        return Some(Value::Object(obj));
    }
    if !matches!(
        kind.as_str(),
        "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount" | "ResourceQuota"
    ) {
        return None;
    }
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, f) {
            (_, 1, Field::Bytes(x)) => {
                obj.insert("metadata".into(), object_meta(x)?);
            }
            ("ConfigMap", 2, Field::Bytes(x)) => push_map(&mut obj, "data", x, false)?,
            ("ConfigMap", 3, Field::Bytes(x)) => push_map(&mut obj, "binaryData", x, true)?,
            ("ConfigMap" | "Secret", 4 | 5, Field::Varint(v)) => {
                obj.insert("immutable".into(), (v != 0).into());
            }
            ("Secret", 2, Field::Bytes(x)) => push_map(&mut obj, "data", x, true)?,
            ("Secret", 3, Field::Bytes(x)) => {
                obj.insert("type".into(), string(x)?);
            }
            ("Secret", 4, Field::Bytes(x)) => push_map(&mut obj, "stringData", x, false)?,
            ("Namespace", 2, Field::Bytes(x)) => {
                let mut spec = Map::new();
                for (sn, sf) in fields(x)? {
                    if let (1, Field::Bytes(y)) = (sn, sf) {
                        push_list(&mut spec, "finalizers", string(y)?)?;
                    }
                }
                obj.insert("spec".into(), Value::Object(spec));
            }
            ("ServiceAccount", 4, Field::Varint(v)) => {
                obj.insert("automountServiceAccountToken".into(), (v != 0).into());
            }
            ("ResourceQuota", 2, Field::Bytes(x)) => {
                obj.insert("spec".into(), quota_spec(x)?);
            }
            ("Namespace" | "ConfigMap" | "Secret" | "ServiceAccount" | "ResourceQuota", _, _) => {}
            _ => return None,
        }
    }
    Some(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, b: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, b.len() as u8];
        out.extend_from_slice(b);
        out
    }

    #[test]
    fn decodes_a_configmap() {
        let meta = field(1, b"demo");
        let entry = [field(1, b"k"), field(2, b"v")].concat();
        let cm = [field(1, &meta), field(2, &entry)].concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "demo"}, "data": {"k": "v"}})
        );
    }

    /// The bytes `kubectl auth can-i get /logs` posts (kubectl 1.32).
    #[test]
    fn decodes_kubectls_self_subject_access_review() {
        let body = b"k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12,\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x0e\x12\x0c\n\x05/logs\x12\x03get\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
        let v = decode(body).unwrap();
        assert_eq!(v["kind"], "SelfSubjectAccessReview");
        assert_eq!(
            v["spec"],
            json!({"nonResourceAttributes": {"path": "/logs", "verb": "get"}})
        );
        assert_eq!(v["metadata"]["name"], "");
    }

    #[test]
    fn decodes_a_subject_access_review() {
        let ra = [
            field(1, b"team-a"),
            field(2, b"create"),
            field(3, b"weft.dev"),
            field(5, b"workflows"),
        ]
        .concat();
        let extra = [field(1, b"k"), field(2, &field(1, b"v"))].concat();
        let spec = [
            field(1, &ra),
            field(3, b"alice"),
            field(4, b"team-a"),
            field(4, b"devs"),
            field(5, &extra),
        ]
        .concat();
        let tm = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SubjectAccessReview"),
        ]
        .concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &field(2, &spec))].concat();
        assert_eq!(
            decode(&body).unwrap()["spec"],
            json!({"resourceAttributes": {"namespace": "team-a", "verb": "create",
                                          "group": "weft.dev", "resource": "workflows"},
                   "user": "alice", "groups": ["team-a", "devs"], "extra": {"k": ["v"]}})
        );
    }

    #[test]
    fn decodes_a_resource_quota() {
        let meta = field(1, b"q");
        let hard = [field(1, b"pods"), field(2, &field(1, b"2"))].concat();
        let spec = [field(1, &hard), field(2, b"BestEffort")].concat();
        let rq = [field(1, &meta), field(2, &spec)].concat();
        let tm = [field(1, b"v1"), field(2, b"ResourceQuota")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &rq)].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                   "spec": {"hard": {"pods": "2"}, "scopes": ["BestEffort"]}})
        );
    }
}
