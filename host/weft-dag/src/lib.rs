//! The Workflow's spec and status, and everything done to them that needs
//! no cluster: validation, compilation into a DAG, and the scheduler that
//! moves nodes forward one reconcile round at a time.
//!
//! The controller owns the I/O: it hands a round the spec, the last status
//! and an [`schedule::Executor`] that starts and observes tasks, and writes
//! back the status the round produced. Everything here is deterministic
//! given the clock the caller passes in, so it is tested without a cluster
//! and benchmarked at 10,000 nodes.

pub mod actions;
pub mod artifacts;
pub mod cache;
pub mod compile;
pub mod compiled;
pub mod cron;
pub mod expr;
pub mod fuzz;
pub mod history;
pub mod inputs;
pub mod nodes;
pub mod problem;
pub mod round;
pub mod schedule;
pub mod spec;
pub mod status;
pub mod template;
pub mod ttl;

pub use compile::{Compiled, Problem, compile};
pub use schedule::{Executor, RoundInput, RoundOutcome, TaskObservation, TaskRequest, reconcile};
pub use spec::{
    ArraySpec, FailurePolicy, GateSpec, NodeKind, NodeSpec, RetrySpec, TaskSpec, WorkflowSpec,
};
pub use status::{NodePhase, NodeStatus, WorkflowPhase, WorkflowStatus};
