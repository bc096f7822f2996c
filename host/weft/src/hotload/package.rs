//! How a plugin is packed into ConfigMaps, shared by the loader and
//! `weft plugin push`. No API calls here: ConfigMaps in, bytes out, and back.
//!
//! A plugin is one *head* ConfigMap labelled `weft.dev/plugin=<plugin name>`:
//!
//! ```yaml
//! data:
//!   manifest.yaml: |          # the plugin manifest, as beside a .wasm file
//!     name: echo
//!     ...
//!   digest: sha256:...        # of the whole uncompressed component; required with parts
//!   pinning: pinned           # or latest (optional)
//!   rollout: canary           # or shadow, or aborted (optional: see below)
//!   canaryPercent: "25"       # with rollout: canary
//!   parts: echo-part-3f2a9c01d2e4-0,echo-part-3f2a9c01d2e4-1   # only when split
//! binaryData:
//!   component.wasm: ...       # only when not split; raw, zstd or gzip (by magic bytes)
//! ```
//!
//! A component whose compressed form is over [`PART_SIZE`] is split into
//! numbered *part* ConfigMaps (label `weft.dev/plugin-part=<head>`, one
//! `binaryData.part` each, owned by the head so deleting it deletes them);
//! the concatenation of the parts is the (compressed) component. Part names
//! carry the digest, so a push never rewrites the parts an older head
//! still references, and a head always points at a consistent set.
//!
//! With `rollout`, the version is not published: it is loaded beside the
//! serving one as a shadow or a canary (`weft plugin push --shadow |
//! --canary N`); removing `rollout` promotes it (`weft plugin promote`),
//! `rollout: aborted` drops it (`weft plugin abort`, or the circuit
//! breaker). The serving version is kept as an archive meanwhile.
//!
//! The plain `kubectl` path, for a component under 1 MiB:
//! `kubectl create configmap echo --from-file=component.wasm=echo.wasm
//! --from-file=manifest.yaml=echo.yaml && kubectl label configmap echo weft.dev/plugin=echo`.

use std::collections::BTreeMap;
use std::io::Read;

use k8s_openapi::{
    ByteString, api::core::v1::ConfigMap, apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::api::ObjectMeta;
use weft_plugin::{Pinning, engine::Digest, rollout::RolloutMode};

/// Label of a plugin's head ConfigMap; its value is the plugin name (informative).
pub const LABEL_PLUGIN: &str = "weft.dev/plugin";
/// Label of a part ConfigMap; its value is the head's name.
pub const LABEL_PART: &str = "weft.dev/plugin-part";
/// Label of an *archive* head: a replaced version that running workflows
/// still pin, kept by the loader so a restarted controller can load it
/// (its value is the plugin name). Same layout as a head; not served.
pub const LABEL_ARCHIVE: &str = "weft.dev/plugin-archive";
/// Annotation the loader sets on a head it rejected (removed once a version loads).
pub const ANNOTATION_ERROR: &str = "weft.dev/plugin-error";
/// Annotation the loader sets on a head when its plugin first serves: the
/// claim time (Unix milliseconds) that decides task-type conflicts ("first
/// loaded wins"), kept across restarts. Never rewritten once set.
pub const ANNOTATION_CLAIMED_AT: &str = "weft.dev/claimed-at";
/// Annotation the loader keeps on each head: what serves, pins, breaker (JSON).
pub const ANNOTATION_STATUS: &str = "weft.dev/plugin-status";
/// The manifest's key in `data`.
pub const KEY_MANIFEST: &str = "manifest.yaml";
/// The component's key in `binaryData`.
pub const KEY_COMPONENT: &str = "component.wasm";
/// The digest of the whole component in `data`.
pub const KEY_DIGEST: &str = "digest";
/// The comma-separated part ConfigMap names in `data`.
pub const KEY_PARTS: &str = "parts";
/// The pinning policy in `data`: `pinned` (default) or `latest`.
pub const KEY_PINNING: &str = "pinning";
/// The roll-out in `data`: `shadow`, `canary` or `aborted` (optional).
pub const KEY_ROLLOUT: &str = "rollout";
/// The canary's share of new workflows in `data`, 1-100.
pub const KEY_CANARY_PERCENT: &str = "canaryPercent";
/// The chunk's key in a part's `binaryData`.
pub const KEY_PART: &str = "part";
/// Kubernetes refuses ConfigMaps whose data is over 1 MiB.
pub const CONFIGMAP_LIMIT: usize = 1 << 20;
/// The most component bytes one ConfigMap carries, leaving room for the
/// manifest and metadata under [`CONFIGMAP_LIMIT`].
pub const PART_SIZE: usize = 900 << 10;

/// Why a plugin ConfigMap cannot be assembled into a component.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// No `data.manifest.yaml`.
    #[error("no data.{KEY_MANIFEST}")]
    NoManifest,
    /// Neither `binaryData.component.wasm` (or another single `*.wasm*` key) nor `data.parts`.
    #[error("no component: expected binaryData.{KEY_COMPONENT} or data.{KEY_PARTS}")]
    NoComponent,
    /// Split without `data.digest`, or a digest that does not parse.
    #[error("data.{KEY_DIGEST} {0}")]
    BadDigest(String),
    /// `data.pinning` is neither `pinned` nor `latest`.
    #[error("data.{KEY_PINNING} is {0:?}: expected pinned or latest")]
    BadPinning(String),
    /// `data.rollout` or `data.canaryPercent` is not understood.
    #[error("data.{KEY_ROLLOUT}: {0}")]
    BadRollout(String),
    /// A part is missing or has no `binaryData.part`.
    #[error("part {name}: {problem}")]
    Part {
        /// The part ConfigMap.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// The component decompresses to more than the cap.
    #[error("component is over the size limit of {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// The compressed stream is corrupt.
    #[error("cannot decompress {codec} component: {message}")]
    Decompress {
        /// `zstd` or `gzip`.
        codec: &'static str,
        /// The decoder's complaint.
        message: String,
    },
    /// The assembled component is not what `data.digest` says.
    #[error("digest mismatch: data.{KEY_DIGEST} says {expected} but the component is {actual}")]
    DigestMismatch {
        /// Declared.
        expected: Digest,
        /// Computed.
        actual: Digest,
    },
}

impl Problem {
    /// A short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Problem::NoManifest => "no_manifest",
            Problem::NoComponent => "no_component",
            Problem::BadDigest(_) => "bad_digest",
            Problem::BadPinning(_) => "bad_pinning",
            Problem::BadRollout(_) => "bad_rollout",
            Problem::Part { .. } => "missing_part",
            Problem::TooLarge { .. } => "too_large",
            Problem::Decompress { .. } => "decompress",
            Problem::DigestMismatch { .. } => "digest_mismatch",
        }
    }
}

/// Where the component bytes of a head are.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// In the head itself.
    Inline(Vec<u8>),
    /// In these part ConfigMaps, in order.
    Parts(Vec<String>),
}

/// What a head asks of its version besides serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadRollout {
    /// Load it beside the serving version as a shadow or canary.
    Start(RolloutMode),
    /// Its roll-out was aborted: the serving version stays.
    Aborted,
}

impl HeadRollout {
    /// Reads `data.rollout` and `data.canaryPercent`.
    fn parse(data: &BTreeMap<String, String>) -> Result<Option<HeadRollout>, Problem> {
        let percent = data.get(KEY_CANARY_PERCENT).map(|s| s.trim());
        Ok(Some(match data.get(KEY_ROLLOUT).map(|s| s.trim()) {
            None | Some("") => return Ok(None),
            Some("shadow") => HeadRollout::Start(RolloutMode::Shadow),
            Some("aborted") => HeadRollout::Aborted,
            Some("canary") => {
                let p = percent
                    .and_then(|p| p.trim_end_matches('%').parse::<u8>().ok())
                    .filter(|p| (1..=100).contains(p))
                    .ok_or_else(|| {
                        Problem::BadRollout(format!(
                            "canary needs data.{KEY_CANARY_PERCENT} between 1 and 100, not {percent:?}"
                        ))
                    })?;
                HeadRollout::Start(RolloutMode::Canary { percent: p })
            }
            Some(other) => {
                return Err(Problem::BadRollout(format!(
                    "{other:?}: expected shadow, canary or aborted"
                )));
            }
        }))
    }

    /// The `data` entries for a roll-out (what `weft plugin push` writes).
    pub fn data(mode: RolloutMode) -> BTreeMap<String, String> {
        match mode {
            RolloutMode::Shadow => BTreeMap::from([(KEY_ROLLOUT.into(), "shadow".into())]),
            RolloutMode::Canary { percent } => BTreeMap::from([
                (KEY_ROLLOUT.into(), "canary".into()),
                (KEY_CANARY_PERCENT.into(), percent.to_string()),
            ]),
        }
    }
}

/// What a head ConfigMap says.
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// The manifest text.
    pub manifest: String,
    /// The digest of the whole uncompressed component, when declared.
    pub digest: Option<Digest>,
    /// The pinning policy.
    pub pinning: Pinning,
    /// A roll-out instead of serving at once.
    pub rollout: Option<HeadRollout>,
    /// The component, or where it is.
    pub body: Body,
}

impl Head {
    /// Reads a head ConfigMap.
    pub fn parse(cm: &ConfigMap) -> Result<Head, Problem> {
        let data = cm.data.clone().unwrap_or_default();
        let binary = cm.binary_data.clone().unwrap_or_default();
        let manifest = data.get(KEY_MANIFEST).ok_or(Problem::NoManifest)?.clone();
        let digest = match data.get(KEY_DIGEST).map(|s| s.trim()) {
            None | Some("") => None,
            Some(s) => Some(
                Digest::parse(s)
                    .ok_or_else(|| Problem::BadDigest(format!("{s:?} is not sha256:<64 hex>")))?,
            ),
        };
        let pinning = match data.get(KEY_PINNING).map(|s| s.trim()) {
            None | Some("") | Some("pinned") => Pinning::Pinned,
            Some("latest") => Pinning::Latest,
            Some(other) => return Err(Problem::BadPinning(other.into())),
        };
        let parts: Vec<String> = data
            .get(KEY_PARTS)
            .map(|s| {
                s.split([',', '\n', ' '])
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let body = if !parts.is_empty() {
            if digest.is_none() {
                return Err(Problem::BadDigest(
                    "is required when the component is split into parts".into(),
                ));
            }
            Body::Parts(parts)
        } else if let Some(b) = binary.get(KEY_COMPONENT) {
            Body::Inline(b.0.clone())
        } else {
            // `kubectl create configmap --from-file=echo.wasm` keeps the file name.
            let mut wasm = binary.iter().filter(|(k, _)| k.contains(".wasm"));
            match (wasm.next(), wasm.next()) {
                (Some((_, b)), None) => Body::Inline(b.0.clone()),
                _ => return Err(Problem::NoComponent),
            }
        };
        Ok(Head {
            manifest,
            digest,
            pinning,
            rollout: HeadRollout::parse(&data)?,
            body,
        })
    }
}

/// The chunk of a part ConfigMap.
pub fn part_bytes(cm: &ConfigMap) -> Option<&[u8]> {
    cm.binary_data
        .as_ref()?
        .get(KEY_PART)
        .map(|b| b.0.as_slice())
}

/// Decompresses (zstd or gzip, by magic bytes; anything else is taken as
/// is), refusing to produce more than `cap` bytes, then checks the digest.
pub fn unpack(
    packed: &[u8],
    expected: Option<Digest>,
    cap: usize,
) -> Result<(Vec<u8>, Digest), Problem> {
    let bytes = match packed {
        [0x28, 0xb5, 0x2f, 0xfd, ..] => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(packed).map_err(|e| {
                Problem::Decompress {
                    codec: "zstd",
                    message: e.to_string(),
                }
            })?;
            read_capped(decoder, cap, "zstd")?
        }
        [0x1f, 0x8b, ..] => read_capped(flate2::read::GzDecoder::new(packed), cap, "gzip")?,
        raw if raw.len() > cap => return Err(Problem::TooLarge { limit: cap }),
        raw => raw.to_vec(),
    };
    let actual = Digest::of(&bytes);
    if let Some(expected) = expected
        && expected != actual
    {
        return Err(Problem::DigestMismatch { expected, actual });
    }
    Ok((bytes, actual))
}

fn read_capped(r: impl Read, cap: usize, codec: &'static str) -> Result<Vec<u8>, Problem> {
    let mut out = Vec::new();
    r.take(cap as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Problem::Decompress {
            codec,
            message: e.to_string(),
        })?;
    if out.len() > cap {
        return Err(Problem::TooLarge { limit: cap });
    }
    Ok(out)
}

/// Compresses with zstd when that makes the component smaller.
pub fn compress(component: &[u8]) -> Vec<u8> {
    let z =
        ruzstd::encoding::compress_to_vec(component, ruzstd::encoding::CompressionLevel::Fastest);
    if z.len() < component.len() {
        z
    } else {
        component.to_vec()
    }
}

/// The ConfigMaps of one plugin: the parts (if any) first, then the head.
/// Apply them in this order, so a head never references a missing part.
#[derive(Debug, Clone)]
pub struct Packed {
    /// Part ConfigMaps (each owned by the head once it exists: see [`owned_by`]).
    pub parts: Vec<ConfigMap>,
    /// The head ConfigMap.
    pub head: ConfigMap,
    /// The component's digest.
    pub digest: Digest,
}

/// Packs a component and its manifest as ConfigMap `name`.
pub fn pack(
    name: &str,
    plugin: &str,
    component: &[u8],
    manifest: &str,
    pinning: Pinning,
) -> Packed {
    let stored = Stored {
        manifest: manifest.to_string(),
        digest: Digest::of(component),
        pinning,
        packed: compress(component),
    };
    pack_stored(name, (LABEL_PLUGIN, plugin), &stored)
}

/// A version as it was read from its ConfigMaps: enough to write it again
/// (as an archive) without decompressing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The manifest text.
    pub manifest: String,
    /// The uncompressed component's digest.
    pub digest: Digest,
    /// The pinning policy.
    pub pinning: Pinning,
    /// The component as stored (compressed or raw).
    pub packed: Vec<u8>,
}

/// The archive ConfigMaps of a stored version of plugin `plugin` whose head
/// was `head`: named for the digest, labelled [`LABEL_ARCHIVE`].
pub fn archive(head: &str, plugin: &str, stored: &Stored) -> Packed {
    let name = archive_name(head, stored.digest);
    pack_stored(&name, (LABEL_ARCHIVE, plugin), stored)
}

/// The name of the archive of `digest` for head `head` (a valid ConfigMap
/// name: heads are at most 253 characters, so it is trimmed to fit).
pub fn archive_name(head: &str, digest: Digest) -> String {
    let suffix = format!("-v-{}", &digest.hex()[..12]);
    let keep = head
        .len()
        .min(253 - suffix.len() - "-part-123456789012-99".len());
    format!("{}{suffix}", head[..keep].trim_end_matches(['-', '.']))
}

fn pack_stored(name: &str, label: (&str, &str), stored: &Stored) -> Packed {
    let digest = stored.digest;
    let packed = &stored.packed;
    let mut data = BTreeMap::from([
        (KEY_MANIFEST.to_string(), stored.manifest.clone()),
        (KEY_DIGEST.to_string(), digest.to_string()),
    ]);
    if stored.pinning == Pinning::Latest {
        data.insert(KEY_PINNING.into(), "latest".into());
    }
    let meta = |name: String, labels: BTreeMap<String, String>| ObjectMeta {
        name: Some(name),
        labels: Some(labels),
        ..Default::default()
    };
    let mut parts = Vec::new();
    let mut binary = BTreeMap::new();
    if packed.len() <= PART_SIZE {
        binary.insert(KEY_COMPONENT.to_string(), ByteString(packed.clone()));
    } else {
        let short = &digest.hex()[..12];
        let mut names = Vec::new();
        for (i, chunk) in packed.chunks(PART_SIZE).enumerate() {
            let part = format!("{name}-part-{short}-{i}");
            names.push(part.clone());
            parts.push(ConfigMap {
                metadata: meta(
                    part,
                    BTreeMap::from([(LABEL_PART.to_string(), name.to_string())]),
                ),
                binary_data: Some(BTreeMap::from([(
                    KEY_PART.to_string(),
                    ByteString(chunk.to_vec()),
                )])),
                ..Default::default()
            });
        }
        data.insert(KEY_PARTS.into(), names.join(","));
    }
    let head = ConfigMap {
        metadata: meta(
            name.to_string(),
            BTreeMap::from([(label.0.to_string(), label.1.to_string())]),
        ),
        data: Some(data),
        binary_data: (!binary.is_empty()).then_some(binary),
        ..Default::default()
    };
    Packed {
        parts,
        head,
        digest,
    }
}

/// The owner reference that makes a part go when its head is deleted.
pub fn owned_by(head: &ConfigMap) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: head.metadata.name.clone()?,
        uid: head.metadata.uid.clone()?,
        ..Default::default()
    })
}

/// The payload size of a ConfigMap as Kubernetes counts it against 1 MiB.
pub fn payload_size(cm: &ConfigMap) -> usize {
    let d: usize = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    let b: usize = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, v)| k.len() + v.0.len())
        .sum();
    d + b
}

#[cfg(test)]
mod tests;
