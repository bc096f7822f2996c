use super::*;

#[test]
fn each_failure_doubles_the_wait_and_a_success_resets_it() {
    let b = Backoff::default();
    let waits: Vec<Duration> = (0..5).map(|_| b.failed("ns/a")).collect();
    let ms = |n| Duration::from_millis(n);
    assert_eq!(waits, [ms(5), ms(10), ms(20), ms(40), ms(80)]);
    assert_eq!(b.failed("ns/b"), ms(5), "each object counts on its own");
    b.succeeded("ns/a");
    assert_eq!(b.failures("ns/a"), 0);
    assert_eq!(b.failed("ns/a"), ms(5));
}

#[test]
fn the_wait_stops_at_1000_seconds() {
    let b = Backoff::default();
    let last = (0..40).map(|_| b.failed("ns/a")).last().unwrap();
    assert!(last >= MAX, "{last:?}");
    assert!(last < MAX + Duration::from_secs(1), "{last:?}");
}

#[test]
fn past_the_burst_the_bucket_spaces_retries_at_ten_a_second() {
    let b = Backoff::default();
    let now = Instant::now();
    for _ in 0..100 {
        assert_eq!(b.take_token(now), Duration::ZERO);
    }
    let next = b.take_token(now);
    assert!(
        (next.as_secs_f64() - 0.1).abs() < 1e-6,
        "the 101st waits 100 ms: {next:?}"
    );
    let later = b.take_token(now + Duration::from_secs(1));
    assert_eq!(later, Duration::ZERO, "a second refills ten");
}
