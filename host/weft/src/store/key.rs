//! Keys and digests: where an attempt's objects go, and the sha256 that
//! addresses their content in the status and the cache key.

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// A content digest, `sha256:<64 hex digits>` as OCI writes them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest::from_hasher(sha2::Sha256::new_with_prefix(bytes))
    }

    /// The digest a streaming hasher reached.
    pub fn from_hasher(h: sha2::Sha256) -> Digest {
        Digest(format!("sha256:{}", hex::encode(h.finalize())))
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Digest {
    type Error = String;
    fn try_from(s: String) -> Result<Digest, String> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| format!("digest {s:?} does not start with sha256:"))?;
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(format!(
                "digest {s:?} is not sha256: and 64 lowercase hex digits"
            ));
        }
        Ok(Digest(s))
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

/// The key of artifact `name` of `node`'s attempt `attempt` in workflow
/// `workflow` (uid `uid`) of `namespace`:
/// `<namespace>/<workflow>/<uid>/<node>/<attempt>/<name>`. The uid keeps a
/// re-created workflow of the same name from sharing keys; the attempt
/// keeps a retry from overwriting what an earlier attempt uploaded.
pub fn attempt_key(
    namespace: &str,
    workflow: &str,
    uid: &str,
    node: &str,
    attempt: u32,
    name: &str,
) -> String {
    format!("{namespace}/{workflow}/{uid}/{node}/{attempt}/{name}")
}
