use super::*;

fn at(secs: i64) -> SystemTime {
    from_unix(secs).unwrap()
}

fn utc(s: &str) -> SystemTime {
    humantime::parse_rfc3339(s).unwrap()
}

fn ticks(schedule: &Schedule, from: SystemTime, n: usize) -> Vec<String> {
    std::iter::successors(schedule.next_after(from), |t| schedule.next_after(*t))
        .take(n)
        .map(rfc3339)
        .collect()
}

/// A plan with Allow, no deadline, not suspended, nothing active.
fn input<'a>(schedule: &'a Schedule, now: SystemTime, last: Option<SystemTime>) -> PlanInput<'a> {
    PlanInput {
        schedule,
        now,
        last_scheduled: last,
        created: UNIX_EPOCH,
        starting_deadline: None,
        concurrency: ConcurrencyPolicy::Allow,
        suspended: false,
        active: &[],
    }
}

fn every(d: &str) -> Schedule {
    Schedule::parse(&format!("@every {d}"), None).unwrap()
}

#[test]
fn every_ticks_are_multiples_of_the_interval_since_the_epoch() {
    let s = every("2s");
    let ms = |m: u64| UNIX_EPOCH + Duration::from_millis(m);
    assert_eq!(s.next_after(ms(1_000_000_000)), Some(ms(1_000_002_000)));
    assert_eq!(s.next_after(ms(1_000_000_500)), Some(ms(1_000_002_000)));
    assert_eq!(s.next_after(ms(1_000_001_000)), Some(ms(1_000_002_000)));
    assert_eq!(s.next_after(ms(1_000_001_999)), Some(ms(1_000_002_000)));
    assert_eq!(s.next_after(ms(1_000_002_000)), Some(ms(1_000_004_000)));
    assert_eq!(s.at_or_before(ms(1_000_001_999)), Some(ms(1_000_000_000)));
    assert_eq!(s.at_or_before(ms(1_000_002_000)), Some(ms(1_000_002_000)));

    let s = every("1h30m");
    assert_eq!(s.next_after(at(1_000_001)), Some(at(1_004_400))); // 186 * 5400
    assert_eq!(s.next_after(at(-1)), Some(at(0)));
    assert_eq!(s.next_after(at(-5401)), Some(at(-5400)));
}

#[test]
fn every_ticks_do_not_depend_on_when_they_are_asked_for() {
    // Two "controllers" starting at different moments see one tick grid.
    let s = every("7s");
    let a: Vec<_> = ticks(&s, at(1_700_000_000), 40);
    let b: Vec<_> = ticks(
        &Schedule::parse("@EVERY 7s", None).unwrap(),
        at(1_700_000_123),
        20,
    );
    assert!(a.windows(b.len()).any(|w| w == b), "{a:?} vs {b:?}");
    // The zone is ignored.
    let oslo = Schedule::parse("@every 7s", Some("Europe/Oslo")).unwrap();
    assert_eq!(ticks(&oslo, at(1_700_000_000), 40), a);
}

#[test]
fn cron_in_utc_with_and_without_seconds_and_nicknames() {
    let from = utc("2025-01-01T00:07:00Z");
    let s = Schedule::parse("*/15 * * * *", None).unwrap();
    assert_eq!(
        ticks(&s, from, 2),
        ["2025-01-01T00:15:00Z", "2025-01-01T00:30:00Z"]
    );
    let s = Schedule::parse("*/20 7 0 * * *", Some("UTC")).unwrap();
    assert_eq!(
        ticks(&s, from, 3),
        [
            "2025-01-01T00:07:20Z",
            "2025-01-01T00:07:40Z",
            "2025-01-02T00:07:00Z"
        ]
    );
    let s = Schedule::parse("@hourly", None).unwrap();
    assert_eq!(ticks(&s, from, 1), ["2025-01-01T01:00:00Z"]);
    let s = Schedule::parse("@midnight", None).unwrap();
    assert_eq!(ticks(&s, from, 1), ["2025-01-02T00:00:00Z"]);
    // 2025-01-01 is a Wednesday: the next Sunday is the 5th.
    let s = Schedule::parse("@weekly", None).unwrap();
    assert_eq!(ticks(&s, from, 1), ["2025-01-05T00:00:00Z"]);
    let s = Schedule::parse("0 12 * * MON-FRI", None).unwrap();
    assert_eq!(
        ticks(&s, utc("2025-01-03T13:00:00Z"), 1),
        ["2025-01-06T12:00:00Z"]
    );
}

#[test]
fn cron_fields_are_read_in_the_time_zone() {
    // Oslo is UTC+1 in winter, UTC+2 in summer.
    let s = Schedule::parse("0 9 * * *", Some("Europe/Oslo")).unwrap();
    assert_eq!(
        ticks(&s, utc("2025-01-10T00:00:00Z"), 1),
        ["2025-01-10T08:00:00Z"]
    );
    assert_eq!(
        ticks(&s, utc("2025-07-10T00:00:00Z"), 1),
        ["2025-07-10T07:00:00Z"]
    );
}

#[test]
fn daylight_saving_in_new_york() {
    // Spring forward on 2025-03-09: 02:00 EST jumps to 03:00 EDT, so
    // 02:30 does not exist that day; croner runs the tick at 03:00 EDT.
    let s = Schedule::parse("30 2 * * *", Some("America/New_York")).unwrap();
    assert_eq!(
        ticks(&s, utc("2025-03-08T12:00:00Z"), 3),
        [
            "2025-03-09T07:00:00Z", // 03:00 EDT
            "2025-03-10T06:30:00Z", // 02:30 EDT
            "2025-03-11T06:30:00Z",
        ]
    );
    // Fall back on 2025-11-02: 01:00-02:00 happens twice. A fixed time
    // runs once, at its first occurrence (EDT)...
    let s = Schedule::parse("30 1 * * *", Some("America/New_York")).unwrap();
    assert_eq!(
        ticks(&s, utc("2025-11-01T16:00:00Z"), 2),
        [
            "2025-11-02T05:30:00Z", // 01:30 EDT
            "2025-11-03T06:30:00Z", // 01:30 EST
        ]
    );
    // ... a repeating one in both halves.
    let s = Schedule::parse("*/30 1 * * *", Some("America/New_York")).unwrap();
    assert_eq!(
        ticks(&s, utc("2025-11-01T16:00:00Z"), 4),
        [
            "2025-11-02T05:00:00Z",
            "2025-11-02T05:30:00Z",
            "2025-11-02T06:00:00Z",
            "2025-11-02T06:30:00Z",
        ]
    );
    // plan walks backwards over the gap the same way.
    let s = Schedule::parse("30 2 * * *", Some("America/New_York")).unwrap();
    let mut i = input(
        &s,
        utc("2025-03-09T07:00:30Z"),
        Some(utc("2025-03-08T07:30:00Z")),
    );
    i.starting_deadline = Some(Duration::from_secs(60));
    assert_eq!(plan(&i).launch, [utc("2025-03-09T07:00:00Z")]);
}

#[test]
fn parse_errors_name_the_input_and_the_part() {
    let err = |s: &str, tz: Option<&str>| Schedule::parse(s, tz).unwrap_err();
    assert_eq!(
        err("61 * * * *", None),
        r#"schedule "61 * * * *": minute "61": Number out of bounds."#
    );
    assert_eq!(
        err("0 25 * * *", None),
        r#"schedule "0 25 * * *": hour "25": Number out of bounds."#
    );
    assert_eq!(
        err("0 0 * * * 8", None),
        r#"schedule "0 0 * * * 8": day-of-week "8": Number out of bounds."#
    );
    assert!(err("*/0 * * * *", None).starts_with(r#"schedule "*/0 * * * *": minute "*/0": "#));
    assert!(err("* * *", None).starts_with(r#"schedule "* * *": Invalid pattern"#));
    assert!(err("1 2 3 4 5 6 7", None).contains("5 or 6 fields"));
    assert!(err("", None).starts_with(r#"schedule "": "#));
    assert!(err("@reboot", None).starts_with(r#"schedule "@reboot": unknown nickname"#));
    assert_eq!(
        err("0 0 31 2 *", None),
        r#"schedule "0 0 31 2 *": never matches a date"#
    );
    assert_eq!(
        err("@daily", Some("Mars/Base")),
        r#"timezone "Mars/Base": not an IANA time zone (e.g. Europe/Oslo)"#
    );
    assert_eq!(
        err("@every 0s", None),
        r#"schedule "@every 0s": the @every interval must be at least 1s"#
    );
    assert_eq!(
        err("@every 1500ms", None),
        r#"schedule "@every 1500ms": the @every interval must be whole seconds"#
    );
    assert!(
        err("@every junk", None).starts_with(r#"schedule "@every junk": @every "junk": "#),
        "{}",
        err("@every junk", None)
    );
    assert!(err("@every", None).starts_with(r#"schedule "@every": @every "": "#));
    // Leap days are rare, not never.
    assert!(Schedule::parse("0 0 29 2 *", None).is_ok());
}

#[test]
fn one_due_tick_launches_and_next_is_the_following_tick() {
    let s = every("10s");
    let p = plan(&input(&s, at(1_000_000_003), Some(at(1_000_000_000))));
    assert_eq!(
        p,
        Plan {
            next: Some(at(1_000_000_010)),
            ..Plan::default()
        }
    );

    // Half a second past the tick: still due, and `next` is after now.
    let now = at(1_000_000_010) + Duration::from_millis(500);
    let p = plan(&input(&s, now, Some(at(1_000_000_000))));
    assert_eq!(p.launch, [at(1_000_000_010)]);
    assert_eq!(p.last_scheduled, Some(at(1_000_000_010)));
    assert_eq!(p.next, Some(at(1_000_000_020)));
    assert!(p.skipped.is_empty() && p.abort.is_empty());
}

#[test]
fn catch_up_with_a_deadline_launches_each_recent_tick_once() {
    let s = every("10s");
    let mut i = input(&s, at(1_000_000_105), Some(at(1_000_000_000)));
    i.starting_deadline = Some(Duration::from_secs(30));
    let p = plan(&i);
    // 75s, 65s, 55s, 45s, 35s late: skipped; 25s, 15s, 5s: launched.
    assert_eq!(
        p.launch,
        [at(1_000_000_080), at(1_000_000_090), at(1_000_000_100)]
    );
    let skipped: Vec<_> = p.skipped.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        skipped,
        (1..=7)
            .map(|k| at(1_000_000_000 + k * 10))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        p.skipped[0].1,
        "missed by 1m 35s, more than startingDeadlineSeconds 30"
    );
    assert_eq!(
        p.skipped[6].1,
        "missed by 35s, more than startingDeadlineSeconds 30"
    );
    assert_eq!(p.last_scheduled, Some(at(1_000_000_100)));

    // Fed back, nothing is due again.
    i.last_scheduled = p.last_scheduled;
    let again = plan(&i);
    assert!(again.launch.is_empty() && again.skipped.is_empty());
    assert_eq!(again.last_scheduled, None);
}

#[test]
fn catch_up_without_a_deadline_launches_only_the_latest() {
    let s = every("10s");
    let p = plan(&input(&s, at(1_000_000_105), Some(at(1_000_000_000))));
    assert_eq!(p.launch, [at(1_000_000_100)]);
    assert_eq!(p.skipped.len(), 9);
    assert!(
        p.skipped
            .iter()
            .all(|(_, why)| why.contains("only the latest missed tick"))
    );
    assert_eq!(p.last_scheduled, Some(at(1_000_000_100)));
}

#[test]
fn a_long_outage_launches_at_most_100_and_lists_at_most_200() {
    let s = every("1s");
    let now = at(1_000_001_000);
    let mut i = input(&s, now, Some(at(1_000_000_000)));
    i.starting_deadline = Some(Duration::from_secs(3600));
    let p = plan(&i);
    assert_eq!(
        p.launch,
        (901..=1000)
            .map(|k| at(1_000_000_000 + k))
            .collect::<Vec<_>>()
    );
    // One entry for 1..=800, then 801..=900 one by one.
    assert_eq!(p.skipped.len(), 101);
    assert_eq!(p.skipped[0].0, at(1_000_000_001));
    assert!(
        p.skipped[0]
            .1
            .contains("only the latest 200 are considered"),
        "{}",
        p.skipped[0].1
    );
    assert_eq!(p.skipped[1].0, at(1_000_000_801));
    assert!(
        p.skipped[1]
            .1
            .starts_with("more than 100 ticks due at once")
    );
    assert_eq!(p.last_scheduled, Some(now));
}

#[test]
fn forbid_skips_while_one_runs_and_launches_one_when_none_runs() {
    let s = every("10s");
    let active = ["nightly-999".to_string()];
    let mut i = input(&s, at(1_000_000_025), Some(at(1_000_000_000)));
    i.starting_deadline = Some(Duration::from_secs(60));
    i.concurrency = ConcurrencyPolicy::Forbid;
    i.active = &active;
    let p = plan(&i);
    assert!(p.launch.is_empty() && p.abort.is_empty());
    assert_eq!(
        p.skipped,
        [
            (
                at(1_000_000_010),
                "workflow nightly-999 is still running (concurrencyPolicy Forbid)".to_string()
            ),
            (
                at(1_000_000_020),
                "workflow nightly-999 is still running (concurrencyPolicy Forbid)".to_string()
            ),
        ]
    );
    assert_eq!(p.last_scheduled, Some(at(1_000_000_020)));

    let two = ["a".to_string(), "b".to_string()];
    i.active = &two;
    assert!(
        plan(&i).skipped[0]
            .1
            .starts_with("workflow a (and 1 more) is still running")
    );

    i.active = &[];
    let p = plan(&i);
    assert_eq!(p.launch, [at(1_000_000_020)]);
    assert_eq!(p.skipped.len(), 1);
    assert!(
        p.skipped[0]
            .1
            .starts_with("a later tick (2001-09-09T01:47:00Z) is launched instead")
    );
}

#[test]
fn replace_aborts_the_running_and_launches_the_latest() {
    let s = every("10s");
    let active = ["a".to_string(), "b".to_string()];
    let mut i = input(&s, at(1_000_000_025), Some(at(1_000_000_000)));
    i.starting_deadline = Some(Duration::from_secs(60));
    i.concurrency = ConcurrencyPolicy::Replace;
    i.active = &active;
    let p = plan(&i);
    assert_eq!(p.launch, [at(1_000_000_020)]);
    assert_eq!(p.abort, active);
    assert_eq!(p.skipped.len(), 1);
    assert!(p.skipped[0].1.ends_with("(concurrencyPolicy Replace)"));

    // Nothing due: nothing is aborted.
    i.last_scheduled = p.last_scheduled;
    assert_eq!(plan(&i).abort, Vec::<String>::new());
}

#[test]
fn ticks_at_or_before_creation_never_run() {
    let s = every("10s");
    let mut i = input(&s, at(1_000_000_015), None);
    i.created = at(1_000_000_010);
    i.starting_deadline = Some(Duration::from_secs(3600));
    let p = plan(&i);
    assert!(p.launch.is_empty() && p.skipped.is_empty());
    assert_eq!(p.next, Some(at(1_000_000_020)));
    i.now = at(1_000_000_020);
    assert_eq!(plan(&i).launch, [at(1_000_000_020)]);
}

#[test]
fn suspended_does_nothing() {
    let s = every("10s");
    let active = ["a".to_string()];
    let mut i = input(&s, at(1_000_000_105), Some(at(1_000_000_000)));
    i.suspended = true;
    i.concurrency = ConcurrencyPolicy::Replace;
    i.active = &active;
    assert_eq!(plan(&i), Plan::default());
}

#[test]
fn a_clock_behind_last_scheduled_waits_for_the_next_new_tick() {
    let s = every("10s");
    let p = plan(&input(&s, at(1_000_000_005), Some(at(1_000_000_030))));
    assert!(p.launch.is_empty() && p.skipped.is_empty());
    assert_eq!(p.next, Some(at(1_000_000_040)));
}

#[test]
fn repeated_calls_launch_every_tick_exactly_once() {
    let s = every("2s");
    let start = 1_700_000_000_000u64; // ms
    // xorshift: a fixed, dependency-free sequence of call intervals.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for deadline in [Some(Duration::from_secs(10)), None] {
        let mut last = None;
        let mut seen = std::collections::BTreeMap::<SystemTime, u32>::new();
        let mut launched = std::collections::BTreeSet::new();
        let mut now_ms = start;
        while now_ms <= start + 30_000 {
            let now = UNIX_EPOCH + Duration::from_millis(now_ms);
            let mut i = input(&s, now, last);
            i.created = UNIX_EPOCH + Duration::from_millis(start);
            i.starting_deadline = deadline;
            let p = plan(&i);
            for t in p.launch.iter().chain(p.skipped.iter().map(|(t, _)| t)) {
                *seen.entry(*t).or_default() += 1;
            }
            launched.extend(p.launch.iter().copied());
            last = p.last_scheduled.or(last);
            now_ms += rand() % 4_500; // 0 to 4.5 s: sometimes several ticks due
        }
        let all: Vec<_> = (1..=15)
            .map(|k| UNIX_EPOCH + Duration::from_millis(start + k * 2_000))
            .collect();
        // Every tick up to the last call was handled once, never twice.
        assert!(seen.values().all(|n| *n == 1), "{seen:?}");
        assert!(seen.keys().all(|t| all.contains(t)));
        assert!(seen.len() >= 12, "{}", seen.len());
        if deadline.is_some() {
            assert_eq!(
                launched.len(),
                seen.len(),
                "with a deadline nothing is skipped"
            );
        } else {
            assert!(
                launched.len() < seen.len(),
                "some calls saw several ticks due"
            );
        }
    }
}

#[test]
fn workflow_names_are_deterministic_dns_labels() {
    let tick = at(1_700_000_000);
    assert_eq!(workflow_name("nightly", tick), "nightly-1700000000");

    let long = "a".repeat(52);
    assert_eq!(workflow_name(&long, tick), format!("{long}-1700000000"));

    let sixty = format!("{}-xyz345", "report".repeat(9));
    assert_eq!(sixty.len(), 61);
    let name = workflow_name(&sixty, tick);
    let other = workflow_name(&format!("{}-xyz346", "report".repeat(9)), tick);
    assert!(name.len() <= 63, "{name}");
    assert_ne!(name, other, "a shared prefix must not collide");
    assert_eq!(name, workflow_name(&sixty, tick));
    assert!(name.ends_with("-1700000000"));
    assert_ne!(name, workflow_name(&sixty, at(1_700_000_060)));

    for n in [
        name,
        other,
        workflow_name("Dotted.Name", tick),
        workflow_name("---", tick),
    ] {
        assert!(n.len() <= 63, "{n}");
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
            "{n}"
        );
        assert!(n.starts_with(|c: char| c.is_ascii_alphanumeric()), "{n}");
        assert!(n.ends_with(|c: char| c.is_ascii_alphanumeric()), "{n}");
    }
    assert!(workflow_name("Dotted.Name", tick).starts_with("dotted-name-"));
}

#[test]
fn concurrency_policy_reads_like_kubernetes() {
    assert_eq!(ConcurrencyPolicy::default(), ConcurrencyPolicy::Allow);
    let p: ConcurrencyPolicy = serde_json::from_str(r#""Forbid""#).unwrap();
    assert_eq!(p, ConcurrencyPolicy::Forbid);
    assert_eq!(
        serde_json::to_string(&ConcurrencyPolicy::Replace).unwrap(),
        r#""Replace""#
    );
}
