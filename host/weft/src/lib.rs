//! Weft, a workflow executor for Kubernetes whose task types and request
//! policies are sandboxed WebAssembly plugins.
//!
//! The plugin sandbox lives in the `weft-plugin` crate; this crate holds the
//! command line and, module by module, the controller around it.
#![forbid(unsafe_code)]

pub mod actions;
pub mod admin;
pub mod api;
pub mod cli;
pub mod controller;
pub mod dev;
pub mod events;
pub mod history;
pub mod hotload;
pub mod kubeclient;
pub mod lanes;
pub mod live;
pub mod metrics;
pub mod node;
pub mod pod_io;
pub mod pod_secrets;
pub mod profiling;
pub mod render;
pub mod runtime;
pub mod secrets;
pub mod serve;
pub mod store;
pub mod sync;
pub mod telemetry;
pub mod templates;
pub mod webhook;
