//! When a CronWorkflow launches its Workflows: schedules, catch-up after
//! downtime, concurrency policies, and the deterministic Workflow name of
//! each tick.
//!
//! This is a pure function of what the controller passes in (the clock
//! included), so every rule below is unit-tested without a cluster.
//!
//! # Schedules
//!
//! - A cron expression with 5 fields (`minute hour day-of-month month
//!   day-of-week`) or 6 (a leading `second`), as Vixie cron reads it: when
//!   both day fields are restricted, a day matching either runs (`+MON`
//!   in the day-of-week field asks for both). Names (`MON`, `JAN`), `L`, `W`
//!   and `#` work as in [croner](https://docs.rs/croner).
//! - The nicknames `@yearly` (`@annually`), `@monthly`, `@weekly`, `@daily`
//!   (`@midnight`) and `@hourly`.
//! - `@every <duration>` as in Go's robfig/cron (`@every 2s`,
//!   `@every 1h30m`), at least one second and in whole seconds. Its ticks are
//!   the instants that are whole multiples of the interval since the Unix
//!   epoch, not "interval after the last run": every controller process,
//!   before and after a restart, computes the same ticks, so a tick's
//!   Workflow name (and with it the at-most-once guarantee) never depends on
//!   when a controller happened to start.
//!
//! Cron fields are read in `timezone` (an IANA name, UTC when absent) with
//! the zone's daylight saving rules; `@every` ignores the zone. When the
//! clock jumps forward past a fixed time (`30 2 * * *` in America/New_York
//! on the spring-forward day), the tick runs at the first instant after the
//! jump (03:00 local). When the clock goes back, a fixed time that happens
//! twice (`30 1 * * *`) runs once, at its first occurrence, while an
//! expression that repeats within the hour (`*/30 1 * * *`) runs in both
//! halves.
//!
//! # Which ticks run
//!
//! [`plan`] looks at the ticks in `(max(lastScheduledTime, created), now]`.
//! A tick at or before `status.lastScheduledTime` is never looked at again,
//! so a tick launches at most once as long as the controller stores the
//! returned `last_scheduled` after it created the tick's Workflows. The
//! Workflow of a tick has a deterministic name ([`workflow_name`]), and the
//! controller treats `AlreadyExists` as done: a crash between the create and
//! the status write does not launch the tick twice either. Ticks at or
//! before the CronWorkflow's creation never run.
//!
//! Every due tick is either launched or skipped with a reason (for an
//! Event), and `lastScheduledTime` moves to the latest of them:
//!
//! - **Missed ticks** (several due at once, after the controller was down
//!   or the CronWorkflow was suspended): with `startingDeadlineSeconds`,
//!   every due tick no older than the deadline is launched, once each,
//!   oldest first, and older ones are skipped ("missed by 42s, more than
//!   startingDeadlineSeconds 30"). Without it, only the latest due tick is
//!   launched and the older ones are skipped, as Kubernetes CronJobs do.
//!   At most 100 ticks launch in one call: the latest 100; older ones are
//!   skipped. At most 200 due ticks are looked at one by one (the latest
//!   ones); any before them are reported as one skipped entry at the
//!   earliest of them, so a long outage of a per-second schedule costs a
//!   bounded amount of work and Events.
//! - **`Allow`** (the default): launch as above; runs may overlap.
//! - **`Forbid`**: while any of the CronWorkflow's Workflows still runs,
//!   every due tick is skipped ("workflow X is still running") and is not
//!   retried when it finishes. When nothing runs, only the latest due tick
//!   is launched: launching several would run them at the same time.
//! - **`Replace`**: the running Workflows are aborted and only the latest due
//!   tick is launched.
//! - **Suspended**: nothing is launched or skipped and `lastScheduledTime`
//!   stays; after a resume the rules above decide which of the ticks missed
//!   meanwhile still run.
//!
//! `next` is the first tick after now, when the controller should look again.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::errors::CronError;
use croner::parser::{CronParser, Seconds, Year};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// At most this many ticks launch in one call, so a long outage with a
/// generous deadline cannot start an unbounded burst of Workflows at once.
pub const MAX_LAUNCH: usize = 100;

/// At most this many due ticks are looked at one by one (the latest ones):
/// bounds the work and the Events after a long outage. Above
/// [`MAX_LAUNCH`], so the launch cap applies before this one does.
const MAX_LISTED: usize = 2 * MAX_LAUNCH;

/// The nicknames croner knows (`@midnight` is mapped to `@daily` first).
const NICKNAMES: [&str; 6] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@hourly",
];

/// Field names of a 6-field expression; a 5-field one has no `second`.
const FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day-of-month",
    "month",
    "day-of-week",
];

/// What a CronWorkflow does when a tick comes while an earlier Workflow of
/// it still runs (Kubernetes CronJob's and Argo's `concurrencyPolicy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Launch anyway; runs may overlap.
    #[default]
    Allow,
    /// Skip the tick while an earlier run is still running.
    Forbid,
    /// Abort the running Workflows and launch the new tick.
    Replace,
}

/// A CronWorkflow: a Workflow launched on a schedule (Flyte's scheduler,
/// Argo's CronWorkflow, with Kubernetes CronJob's fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronWorkflowSpec {
    /// A cron expression (5 fields, or 6 with seconds first), a nickname
    /// (`@daily`) or `@every <duration>` (`@every 30s`).
    pub schedule: String,
    /// The IANA time zone the cron fields are read in (UTC when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// What a tick does while an earlier Workflow still runs.
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// A tick missed (no controller ran) by more than this is skipped;
    /// without it, only the latest missed tick is launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<u64>,
    /// Succeeded Workflows kept (default 3); older ones are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<u32>,
    /// Failed or aborted Workflows kept (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<u32>,
    /// No ticks launch while true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// The Workflow each tick launches: nodes of its own, or a
    /// `workflowTemplateRef`. An input named `scheduledTime` gets the
    /// tick's time (RFC 3339) when the workflow or its template declares it.
    #[schemars(schema_with = "crate::spec::any_object")]
    pub workflow_spec: crate::spec::WorkflowSpec,
}

/// Default of `successfulJobsHistoryLimit`.
pub const DEFAULT_SUCCESSFUL_HISTORY: u32 = 3;
/// Default of `failedJobsHistoryLimit`.
pub const DEFAULT_FAILED_HISTORY: u32 = 1;
/// The input a tick's time is given as, when declared.
pub const SCHEDULED_TIME_INPUT: &str = "scheduledTime";

/// A CronWorkflow's status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronWorkflowStatus {
    /// The latest tick launched or deliberately skipped: no tick at or
    /// before it is looked at again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled_time: Option<String>,
    /// The next tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_scheduled_time: Option<String>,
    /// Its Workflows that are still running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// Why it cannot schedule (a bad schedule or time zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A parsed schedule in a time zone: the ticks at which a CronWorkflow
/// launches.
#[derive(Debug, Clone)]
pub struct Schedule {
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    /// Boxed: a parsed pattern is large, and the `@every` variant is tiny.
    Cron { cron: Box<Cron>, zone: Tz },
    /// Ticks at whole multiples of this many seconds since the Unix epoch.
    Every { seconds: i64 },
}

impl Schedule {
    /// Parses `schedule` (a cron expression or `@every D`) in `timezone` (an
    /// IANA name; `None` is UTC).
    ///
    /// Errors name the input and the bad part, e.g.
    /// `schedule "61 * * * *": minute "61": Number out of bounds.`, so they
    /// can go into a status condition as they are. A cron expression that
    /// never matches a date (`0 0 31 2 *`) is an error too, rather than a
    /// CronWorkflow that silently never runs.
    pub fn parse(schedule: &str, timezone: Option<&str>) -> Result<Schedule, String> {
        let zone = match timezone {
            None => Tz::UTC,
            Some(name) => name.parse::<Tz>().map_err(|_| {
                format!("timezone {name:?}: not an IANA time zone (e.g. Europe/Oslo)")
            })?,
        };
        let text = schedule.trim();
        let bad = |why: &dyn std::fmt::Display| format!("schedule {schedule:?}: {why}");
        let rule = if let Some(interval) = strip_prefix_ignore_case(text, "@every") {
            let interval = interval.trim();
            let d = humantime::parse_duration(interval)
                .map_err(|e| bad(&format_args!("@every {interval:?}: {e}")))?;
            if d < Duration::from_secs(1) {
                return Err(bad(&"the @every interval must be at least 1s"));
            }
            if d.subsec_nanos() != 0 {
                return Err(bad(&"the @every interval must be whole seconds"));
            }
            let seconds =
                i64::try_from(d.as_secs()).map_err(|_| bad(&"the @every interval is too long"))?;
            Rule::Every { seconds }
        } else {
            let cron = parse_cron(text).map_err(|e| bad(&e))?;
            Rule::Cron {
                cron: Box::new(cron),
                zone,
            }
        };
        let parsed = Schedule { rule };
        // Every expression without a year repeats within a few decades, so
        // one that finds no tick from 2000 on never runs.
        if parsed
            .next_after(UNIX_EPOCH + Duration::from_secs(946_684_800))
            .is_none()
        {
            return Err(bad(&"never matches a date"));
        }
        Ok(parsed)
    }

    /// The first tick strictly after `t`; `None` when there is none.
    pub fn next_after(&self, t: SystemTime) -> Option<SystemTime> {
        // Ticks fall on whole seconds, so the first one after `t` is the
        // first one after `t` rounded down.
        let s = unix_seconds(t);
        match &self.rule {
            Rule::Every { seconds } => from_unix(
                s.div_euclid(*seconds)
                    .checked_add(1)?
                    .checked_mul(*seconds)?,
            ),
            Rule::Cron { cron, zone } => {
                let at = DateTime::<Utc>::from_timestamp(s, 0)?.with_timezone(zone);
                from_unix(cron.find_next_occurrence(&at, false).ok()?.timestamp())
            }
        }
    }

    /// The latest tick at or before `t`; `None` when there is none.
    fn at_or_before(&self, t: SystemTime) -> Option<SystemTime> {
        let s = unix_seconds(t);
        match &self.rule {
            Rule::Every { seconds } => from_unix(s.div_euclid(*seconds).checked_mul(*seconds)?),
            Rule::Cron { cron, zone } => {
                let at = DateTime::<Utc>::from_timestamp(s, 0)?.with_timezone(zone);
                from_unix(cron.find_previous_occurrence(&at, true).ok()?.timestamp())
            }
        }
    }
}

/// Parses a cron expression with croner, and when croner rejects it, finds
/// the field at fault: croner's own messages ("Number out of bounds.") do
/// not say which field they are about.
fn parse_cron(text: &str) -> Result<Cron, String> {
    let text = if text.eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        text
    };
    if text.starts_with('@') && !NICKNAMES.iter().any(|n| text.eq_ignore_ascii_case(n)) {
        return Err(
            "unknown nickname; use @yearly, @annually, @monthly, @weekly, @daily, \
                    @midnight, @hourly or @every <duration>"
                .to_string(),
        );
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build();
    parser.parse(text).map_err(|e| {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let names: &[&str] = match fields.len() {
            5 => &FIELDS[1..],
            6 => &FIELDS,
            _ => return cron_message(&e),
        };
        // Parse each field alone, the others wildcards; the first that fails
        // is the one to blame.
        let culprit = (0..fields.len()).find(|&i| {
            let probe: Vec<&str> = (0..fields.len())
                .map(|j| if j == i { fields[i] } else { "*" })
                .collect();
            parser.parse(&probe.join(" ")).is_err()
        });
        match culprit {
            Some(i) => format!("{} {:?}: {}", names[i], fields[i], cron_message(&e)),
            None => cron_message(&e),
        }
    })
}

/// Croner's message, without the "Component error: " prefix its `Display`
/// adds to the interesting part.
fn cron_message(e: &CronError) -> String {
    match e {
        CronError::ComponentError(m) => m.clone(),
        e => e.to_string(),
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// Whole seconds since the Unix epoch, rounded down (also before 1970).
fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(before) => {
            let d = before.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            -whole - i64::from(d.subsec_nanos() != 0)
        }
    }
}

fn from_unix(s: i64) -> Option<SystemTime> {
    let d = Duration::from_secs(s.unsigned_abs());
    if s >= 0 {
        UNIX_EPOCH.checked_add(d)
    } else {
        UNIX_EPOCH.checked_sub(d)
    }
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Everything [`plan`] decides from: the CronWorkflow's spec and status and
/// what the controller observed, at `now`.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// The parsed `spec.schedule` and `spec.timezone`.
    pub schedule: &'a Schedule,
    /// The controller's clock.
    pub now: SystemTime,
    /// `status.lastScheduledTime`: the last tick already launched or skipped
    /// on purpose; `None` when no tick ever was.
    pub last_scheduled: Option<SystemTime>,
    /// When the CronWorkflow was created: ticks at or before it never run,
    /// so creating a CronWorkflow does not launch a "missed" tick.
    pub created: SystemTime,
    /// `spec.startingDeadlineSeconds`: how late a tick may still launch.
    pub starting_deadline: Option<Duration>,
    /// `spec.concurrencyPolicy`.
    pub concurrency: ConcurrencyPolicy,
    /// `spec.suspend`.
    pub suspended: bool,
    /// Names of this CronWorkflow's Workflows that are still running.
    pub active: &'a [String],
}

/// What the controller does now; see the [module docs](self) for the rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Ticks to launch now, oldest first; each becomes one Workflow named
    /// by [`workflow_name`].
    pub launch: Vec<SystemTime>,
    /// Running Workflows to abort before launching (`Replace`).
    pub abort: Vec<String>,
    /// Due ticks not launched and why, oldest first, for Events.
    pub skipped: Vec<(SystemTime, String)>,
    /// The new `status.lastScheduledTime`: the latest tick launched or
    /// skipped. `None` leaves the status as it is.
    pub last_scheduled: Option<SystemTime>,
    /// When to look again: the next tick after now. `None` when suspended or
    /// when the schedule has no more ticks.
    pub next: Option<SystemTime>,
}

/// Decides what a CronWorkflow does at `input.now`: which ticks to launch
/// or skip, and which running Workflows to abort.
pub fn plan(input: &PlanInput) -> Plan {
    if input.suspended {
        return Plan::default();
    }
    let schedule = input.schedule;
    let floor = input
        .last_scheduled
        .map_or(input.created, |l| l.max(input.created));
    let mut plan = Plan {
        // After `floor` even if the clock went back: ticks up to it are done.
        next: schedule.next_after(input.now.max(floor)),
        ..Plan::default()
    };

    // The due ticks, latest first, walking back from now: at most
    // MAX_LISTED of them, however long the outage was.
    let mut due = Vec::new();
    let mut cursor = schedule.at_or_before(input.now);
    while let Some(tick) = cursor.filter(|t| *t > floor) {
        if due.len() == MAX_LISTED {
            if let Some(earliest) = schedule.next_after(floor) {
                plan.skipped.push((
                    earliest,
                    format!(
                        "missed, with every tick up to {}: more than {MAX_LISTED} ticks were \
                         due, only the latest {MAX_LISTED} are considered",
                        rfc3339(tick)
                    ),
                ));
            }
            break;
        }
        due.push(tick);
        cursor = tick
            .checked_sub(Duration::from_secs(1))
            .and_then(|t| schedule.at_or_before(t));
    }
    due.reverse();
    let Some(&latest) = due.last() else {
        return plan;
    };
    plan.last_scheduled = Some(latest);

    // Which due ticks are still wanted at all, oldest first.
    let mut wanted = Vec::new();
    for tick in due {
        let late = input.now.duration_since(tick).unwrap_or_default();
        match input.starting_deadline {
            Some(deadline) if late > deadline => plan.skipped.push((
                tick,
                format!(
                    "missed by {}, more than startingDeadlineSeconds {}",
                    humantime::format_duration(Duration::from_secs(late.as_secs())),
                    deadline.as_secs()
                ),
            )),
            None if tick != latest => plan.skipped.push((
                tick,
                "missed; without startingDeadlineSeconds only the latest missed tick is \
                 launched"
                    .to_string(),
            )),
            _ => wanted.push(tick),
        }
    }

    let (keep, reason) = match input.concurrency {
        ConcurrencyPolicy::Allow => (
            MAX_LAUNCH,
            format!(
                "more than {MAX_LAUNCH} ticks due at once; only the latest {MAX_LAUNCH} are launched"
            ),
        ),
        ConcurrencyPolicy::Forbid if !input.active.is_empty() => {
            let mut why = format!("workflow {} ", input.active[0]);
            if input.active.len() > 1 {
                let _ = write!(why, "(and {} more) ", input.active.len() - 1);
            }
            why.push_str("is still running (concurrencyPolicy Forbid)");
            (0, why)
        }
        policy => (
            1,
            format!(
                "a later tick ({}) is launched instead (concurrencyPolicy {policy:?})",
                wanted.last().map_or_else(String::new, |t| rfc3339(*t))
            ),
        ),
    };
    let first_kept = wanted.len().saturating_sub(keep);
    plan.skipped
        .extend(wanted[..first_kept].iter().map(|t| (*t, reason.clone())));
    plan.launch = wanted.split_off(first_kept);
    if input.concurrency == ConcurrencyPolicy::Replace && !plan.launch.is_empty() {
        plan.abort = input.active.to_vec();
    }
    // Stable: the summary of unlisted ticks stays first.
    plan.skipped.sort_by_key(|(t, _)| *t);
    plan
}

/// The Workflow name of `cron`'s tick at `tick`: `{cron}-{unix seconds}`,
/// the scheme Argo uses, so the same tick gets the same name in every
/// controller process and a second create of it fails with `AlreadyExists`.
///
/// The result is a valid DNS label of at most 63 characters. A CronWorkflow
/// name that does not fit (or is no DNS label, e.g. has dots) is cut and
/// given a hash of the whole name, so two CronWorkflows that share a long
/// prefix still get different names.
pub fn workflow_name(cron: &str, tick: SystemTime) -> String {
    const MAX: usize = 63;
    const HASH_HEX: usize = 10;
    let suffix = format!("-{}", unix_seconds(tick).max(0));
    let is_label = cron
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && cron
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if is_label && cron.len() + suffix.len() <= MAX {
        return format!("{cron}{suffix}");
    }
    let mut hash = String::with_capacity(HASH_HEX);
    for b in &Sha256::digest(cron.as_bytes())[..HASH_HEX / 2] {
        let _ = write!(hash, "{b:02x}");
    }
    let room = MAX - suffix.len() - HASH_HEX - 1;
    let cleaned: String = cron
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(room)
        .collect();
    let prefix = cleaned.trim_matches('-');
    if prefix.is_empty() {
        format!("{hash}{suffix}")
    } else {
        format!("{prefix}-{hash}{suffix}")
    }
}

#[cfg(test)]
mod tests {
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
    fn input<'a>(
        schedule: &'a Schedule,
        now: SystemTime,
        last: Option<SystemTime>,
    ) -> PlanInput<'a> {
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
}
