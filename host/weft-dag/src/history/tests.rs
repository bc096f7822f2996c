use std::time::{Duration, SystemTime};

use super::*;
use crate::status::{LogLink, NodePhase, PluginRef, WorkflowPhase};

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

fn transition(node: &str, from: NodePhase, to: NodePhase, attempt: u32) -> Transition {
    Transition {
        node: node.into(),
        from,
        to,
        message: (to == NodePhase::Failed).then(|| "exit code 3".to_string()),
        attempt,
    }
}

fn task_status(phase: NodePhase) -> NodeStatus {
    NodeStatus {
        phase,
        attempts: 2,
        reason: (phase == NodePhase::Failed).then(|| "Error".to_string()),
        plugin: Some(PluginRef {
            name: "pod".into(),
            digest: "sha256:ab".into(),
        }),
        resource: Some(ResourceRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "wf-train-2".into(),
            meta: Some("kept out of events".into()),
        }),
        log_links: vec![LogLink {
            name: "logs".into(),
            uri: "https://logs/wf-train-2".into(),
        }],
        ..Default::default()
    }
}

#[test]
fn a_task_transition_makes_a_node_and_a_task_event_with_the_attempts_details() {
    let old = WorkflowStatus {
        phase: WorkflowPhase::Running,
        ..Default::default()
    };
    let mut new = old.clone();
    new.nodes
        .insert("train".into(), task_status(NodePhase::Failed));
    let t = transition("train", NodePhase::Running, NodePhase::Failed, 2);
    let events = round_events(&old, &new, &[t], at(5));
    let kinds: Vec<_> = events
        .iter()
        .map(|e| (e.kind, e.attempt, e.phase.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (EventKind::Node, 2, "Failed"),
            (EventKind::Task, 2, "Failed")
        ]
    );
    let task = &events[1];
    assert_eq!(task.plugin.as_ref().unwrap().digest, "sha256:ab");
    let resource = task.resource.as_ref().unwrap();
    assert_eq!(
        (resource.name.as_str(), resource.meta.as_ref()),
        ("wf-train-2", None)
    );
    assert_eq!(task.log_links.len(), 1);
    assert_eq!(task.reason.as_deref(), Some("Error"));
    assert_eq!(task.message.as_deref(), Some("exit code 3"));
    assert_eq!(task.at, "2027-01-15T08:00:05Z");
    assert!(
        events[0].plugin.is_none(),
        "the node event carries no attempt details"
    );
}

#[test]
fn a_node_that_is_no_task_makes_a_node_event_only_and_so_does_attempt_zero() {
    let old = WorkflowStatus::default();
    let mut new = old.clone();
    new.nodes.insert("gate".into(), NodeStatus::default());
    new.nodes
        .insert("train".into(), task_status(NodePhase::Skipped));
    let ts = [
        transition("gate", NodePhase::Pending, NodePhase::Running, 0),
        transition("train", NodePhase::Pending, NodePhase::Skipped, 0),
    ];
    let events = round_events(&old, &new, &ts, at(0));
    assert!(
        events.iter().all(|e| e.kind == EventKind::Node),
        "{events:?}"
    );
    assert_eq!(events.len(), 2);
}

#[test]
fn the_workflow_event_comes_with_a_phase_change_and_with_each_users_retry() {
    let old = WorkflowStatus {
        phase: WorkflowPhase::Failed,
        ..Default::default()
    };
    let mut new = old.clone();
    assert!(round_events(&old, &new, &[], at(0)).is_empty());
    new.phase = WorkflowPhase::Running;
    new.retries.push(Default::default());
    let events = round_events(&old, &new, &[], at(1));
    assert_eq!(events.len(), 1);
    let e = &events[0];
    assert_eq!(
        (e.kind, e.attempt, e.phase.as_str()),
        (EventKind::Workflow, 2, "Running")
    );
    assert_eq!(e.id().node, "");
}

#[test]
fn record_adds_each_id_once_so_a_repeated_round_adds_nothing() {
    let mut status = WorkflowStatus::default();
    status
        .nodes
        .insert("train".into(), task_status(NodePhase::Running));
    let t = [transition(
        "train",
        NodePhase::Pending,
        NodePhase::Running,
        1,
    )];
    let events = round_events(&WorkflowStatus::default(), &status, &t, at(0));
    record(&mut status, events.clone());
    let again = round_events(&WorkflowStatus::default(), &status, &t, at(9));
    record(&mut status, again);
    assert_eq!(
        status.outbox, events,
        "the first copy (and its time) is kept"
    );
}

#[test]
fn events_round_trip_through_the_status_json() {
    let mut status = WorkflowStatus::default();
    status
        .nodes
        .insert("train".into(), task_status(NodePhase::Succeeded));
    let t = [transition(
        "train",
        NodePhase::Running,
        NodePhase::Succeeded,
        2,
    )];
    let events = round_events(&WorkflowStatus::default(), &status, &t, at(0));
    record(&mut status, events);
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["outbox"][1]["kind"], "task");
    let back: WorkflowStatus = serde_json::from_value(json).unwrap();
    assert_eq!(back.outbox, status.outbox);
}

#[test]
fn a_node_that_starts_is_running_in_its_first_attempt() {
    // The round moves a starting node to Running before its handler
    // counts the attempt (`begin_attempt`).
    let mut new = WorkflowStatus::default();
    new.nodes
        .insert("train".into(), task_status(NodePhase::Running));
    new.nodes.get_mut("train").unwrap().attempts = 1;
    new.nodes.insert("gate".into(), NodeStatus::default());
    let ts = [
        transition("train", NodePhase::Pending, NodePhase::Running, 0),
        transition("gate", NodePhase::Pending, NodePhase::Running, 0),
    ];
    let events = round_events(&WorkflowStatus::default(), &new, &ts, at(0));
    let keys: Vec<_> = events
        .iter()
        .map(|e| (e.kind, e.node.as_str(), e.attempt))
        .collect();
    assert_eq!(
        keys,
        [
            (EventKind::Node, "train", 1),
            (EventKind::Task, "train", 1),
            (EventKind::Node, "gate", 0)
        ]
    );
}
