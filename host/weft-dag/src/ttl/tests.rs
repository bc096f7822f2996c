use super::*;
use crate::status::timestamp;

fn finished(phase: WorkflowPhase, at: SystemTime) -> WorkflowStatus {
    WorkflowStatus {
        phase,
        finished_at: Some(timestamp(at)),
        ..Default::default()
    }
}

#[test]
fn the_outcome_picks_the_ttl_then_completion_then_the_default() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let s = TtlStrategy {
        seconds_after_completion: Some(60),
        seconds_after_success: Some(10),
        seconds_after_failure: None,
    };
    let ok = finished(WorkflowPhase::Succeeded, t0);
    let failed = finished(WorkflowPhase::Failed, t0);
    let aborted = finished(WorkflowPhase::Aborted, t0);
    assert_eq!(due(Some(&s), None, &ok), Some(t0 + Duration::from_secs(10)));
    assert_eq!(
        due(Some(&s), None, &failed),
        Some(t0 + Duration::from_secs(60))
    );
    assert_eq!(
        due(Some(&s), None, &aborted),
        Some(t0 + Duration::from_secs(60))
    );
    let day = Duration::from_secs(86_400);
    assert_eq!(due(None, Some(day), &ok), Some(t0 + day));
    assert_eq!(due(None, None, &ok), None);
    let running = WorkflowStatus {
        phase: WorkflowPhase::Running,
        ..Default::default()
    };
    assert_eq!(due(Some(&s), Some(day), &running), None);
}
