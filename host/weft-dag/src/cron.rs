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
mod tests;
