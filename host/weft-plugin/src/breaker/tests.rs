use super::*;

#[test]
fn trips_once_past_the_limit_within_the_window() {
    let b = Breakers::default();
    b.configure(BreakerConfig {
        max_faults: 2,
        window: Duration::from_secs(60),
    });
    let d = Digest::of(b"x");
    assert_eq!(b.fault(d), None);
    assert_eq!(b.fault(d), None);
    assert_eq!(b.fault(d), Some(3));
    assert_eq!(b.fault(d), None, "the counter restarts after a trip");
    assert_eq!(b.fault(Digest::of(b"y")), None, "counted per version");
}

#[test]
fn old_faults_leave_the_window_and_zero_disables() {
    let b = Breakers::default();
    b.configure(BreakerConfig {
        max_faults: 1,
        window: Duration::ZERO,
    });
    let d = Digest::of(b"x");
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(b.fault(d), None);
    }
    b.configure(BreakerConfig {
        max_faults: 0,
        window: Duration::from_secs(60),
    });
    for _ in 0..5 {
        assert_eq!(b.fault(d), None);
    }
}
