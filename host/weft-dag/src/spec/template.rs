//! WorkflowTemplates and the references to them (the types; resolving a
//! launch is `crate::template`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{WorkflowSpec, any_object};

/// A reusable workflow: a Workflow's spec, plus input values fixed for
/// every launch (a launch plan's fixed inputs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowTemplateSpec {
    /// The workflow: nodes, input declarations with defaults, outputs and
    /// settings, as in a Workflow.
    #[serde(flatten)]
    pub workflow: WorkflowSpec,
    /// Values for declared inputs that every launch gets and no launch may
    /// set.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub fixed_inputs: Map<String, Value>,
}

/// A launch of a template: its name and the values of its inputs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateRef {
    /// The WorkflowTemplate, in the Workflow's namespace.
    pub name: String,
    /// Values for the template's inputs, by name.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    #[schemars(schema_with = "any_object")]
    pub inputs: Map<String, Value>,
}

/// The template version a Workflow was resolved from (in its status).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRecord {
    /// The template's name.
    pub name: String,
    /// Its uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Its `metadata.resourceVersion` when the workflow started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Its `metadata.generation` when the workflow started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}
