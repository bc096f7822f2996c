//! A task's artifacts (Argo's `inputs.artifacts` / `outputs.artifacts`,
//! Flyte's FlyteFile and FlyteDirectory): files and directories a task
//! reads and leaves, kept in the artifact repository, never in etcd. What
//! a node's status records of each is an [`ArtifactRef`], under
//! `outputs.artifacts.<name>`, so `${nodes.x.outputs.artifacts.y}` names
//! one like any other output.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A task's `inputs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskInputs {
    /// Artifacts downloaded before the task's command runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<InputArtifact>,
}

/// A task's `outputs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskOutputs {
    /// Files or directories uploaded after the task's command exits 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<OutputArtifact>,
    /// Outputs read from files the task writes (besides its termination
    /// message): the file's text, parsed as JSON when it is JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<OutputParameter>,
}

impl TaskInputs {
    /// Nothing declared.
    pub fn is_empty(&self) -> bool {
        self.artifacts.is_empty()
    }
}

impl TaskOutputs {
    /// Nothing declared.
    pub fn is_empty(&self) -> bool {
        self.artifacts.is_empty() && self.parameters.is_empty()
    }
}

/// An input artifact: where the task reads it, and where it comes from
/// (exactly one of `from` and `url`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputArtifact {
    /// Its name in the task.
    pub name: String,
    /// The absolute path the task reads it at.
    pub path: String,
    /// An expression giving an artifact: `${nodes.x.outputs.artifacts.y}`,
    /// or `${inputs.z}` for a workflow input uploaded beforehand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// An `https://` (or `http://`) URL fetched as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// An output artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputArtifact {
    /// Its name: `outputs.artifacts.<name>` in the node's status.
    pub name: String,
    /// The absolute path of the file or directory the task leaves.
    pub path: String,
    /// When its stored objects are deleted, overriding the workflow's
    /// `artifactGC` for this artifact alone.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "artifactGC"
    )]
    pub artifact_gc: Option<ArtifactGc>,
}

/// When stored artifacts are deleted (Argo's `artifactGC`): the
/// workflow's `spec.artifactGC`, or one output artifact's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactGc {
    /// When the objects go.
    pub strategy: ArtifactGcStrategy,
}

/// Argo's artifact GC strategies. Without any, objects are kept (`Never`),
/// as in Argo: deleting what a user may still want is not a default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ArtifactGcStrategy {
    /// When the Workflow is deleted (a finalizer holds it until they are).
    OnWorkflowDeletion,
    /// Once the workflow has finished, exit handlers included; the
    /// Workflow stays.
    OnWorkflowCompletion,
    /// Kept.
    #[default]
    Never,
}

/// An output parameter read from a file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputParameter {
    /// The output's name.
    pub name: String,
    /// The absolute path of the file.
    pub path: String,
}

/// A stored artifact as a node's status records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRef {
    /// Its key in the artifact repository (below the repository's prefix).
    pub key: String,
    /// `sha256:<hex>` of the stored bytes.
    pub digest: String,
    /// Stored bytes.
    pub size: u64,
    /// `file`, or `directory` (stored as tar.zst).
    pub kind: String,
}

/// Where an input artifact comes from, once its `from` is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactSource {
    /// An object of the artifact repository.
    Stored(ArtifactRef),
    /// A URL fetched as it is.
    Url(String),
}

/// An input artifact of one attempt, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedInput {
    /// Its name in the task.
    pub name: String,
    /// Where the task reads it.
    pub path: String,
    /// Where it comes from.
    pub source: ArtifactSource,
}

impl ResolvedInput {
    /// What the cache key takes from it: the content's digest, or the URL
    /// (names and paths do not change what a task computes from it).
    pub fn cache_identity(&self) -> &str {
        match &self.source {
            ArtifactSource::Stored(a) => &a.digest,
            ArtifactSource::Url(u) => u,
        }
    }
}
