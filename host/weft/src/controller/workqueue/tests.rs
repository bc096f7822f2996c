use super::*;

fn queue() -> (Arc<Metrics>, WorkQueue) {
    let m = Arc::new(Metrics::default());
    (m.clone(), WorkQueue::new(m))
}

fn figure(m: &Metrics, series: &str) -> f64 {
    m.render()
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_waiting_item_is_merged_and_counted_once() {
    let (m, q) = queue();
    q.add("ns/a");
    q.add("ns/a");
    q.add("ns/b");
    assert_eq!(q.depth(), 2);
    let adds = r#"workqueue_adds_total{controller="workflow",name="workflow"}"#;
    assert_eq!(figure(&m, adds), 2.0);
    // The first add counted the depth; the next ones within 100 ms left it
    // to the periodic refresh.
    let depth = r#"workqueue_depth{controller="workflow",name="workflow"}"#;
    assert_eq!(figure(&m, depth), 1.0);
    q.refresh();
    assert_eq!(
        figure(
            &m,
            r#"workqueue_depth{controller="workflow",name="workflow"}"#
        ),
        2.0
    );
    q.taken("ns/a");
    assert_eq!(q.depth(), 1);
    let taken = r#"workqueue_queue_duration_seconds_count{controller="workflow",name="workflow"}"#;
    assert_eq!(figure(&m, taken), 1.0);
}

#[test]
fn a_delayed_requeue_is_not_ready_until_due_and_an_event_brings_it_forward() {
    let (m, q) = queue();
    q.add_after("ns/a", Duration::from_secs(60), true);
    assert_eq!(q.depth(), 0);
    let retries = r#"workqueue_retries_total{controller="workflow",name="workflow"}"#;
    assert_eq!(figure(&m, retries), 1.0);
    q.add("ns/a");
    assert_eq!(q.depth(), 1);
    q.taken("ns/a");
    assert_eq!(q.depth(), 0);
}

#[test]
fn the_depth_is_counted_again_once_100_ms_have_passed() {
    let (m, q) = queue();
    let depth = r#"workqueue_depth{controller="workflow",name="workflow"}"#;
    q.add("ns/a");
    q.add("ns/b");
    assert_eq!(figure(&m, depth), 1.0, "the second add within 100 ms");
    std::thread::sleep(DEPTH_EVERY + Duration::from_millis(10));
    q.taken("ns/a");
    assert_eq!(figure(&m, depth), 1.0, "counted at the take: ns/b waits");
}
