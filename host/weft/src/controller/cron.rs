//! CronWorkflows: each tick of a schedule launches one Workflow, once,
//! across controller restarts and leader changes.
//!
//! What to launch, skip or abort is `weft_dag::cron::plan`, a pure function
//! of the schedule, the clock, the status and the running Workflows. This
//! module reads the cluster for it and makes its writes in an order that
//! keeps a tick from launching twice: the Workflows first (each under the
//! tick's deterministic name, so a repeated create finds it: AlreadyExists
//! is done), then `status.lastScheduledTime`, after which the tick is never
//! looked at again. Then the history limits delete old finished Workflows.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy},
    runtime::{Controller, controller::Action, watcher},
};
use serde_json::json;
use weft_dag::WorkflowPhase;
use weft_dag::cron::{self, CronWorkflowStatus, PlanInput, Schedule};
use weft_dag::status::{parse_timestamp, timestamp};

use super::{Context, Error, MANAGER, record_event};
use crate::api::{CronWorkflow, Workflow, WorkflowResourceSpec, WorkflowTemplate};
use crate::metrics::standard::CRON_CONTROLLER;

/// Label on every Workflow a CronWorkflow launched: the CronWorkflow's name.
pub const LABEL: &str = "weft.dev/cron-workflow";
/// Annotation with the tick a Workflow was launched for (RFC 3339).
pub const SCHEDULED_TIME: &str = "weft.dev/scheduled-time";

/// Runs the CronWorkflow loop until `shutdown` resolves: CronWorkflows in
/// `namespace` (all when `None`), woken by their Workflows' changes too
/// (a run that ends frees a `Forbid` schedule and may exceed the history).
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (crons, workflows): (Api<CronWorkflow>, Api<Workflow>) = match &namespace {
        Some(ns) => (
            Api::namespaced(ctx.client.clone(), ns),
            Api::namespaced(ctx.client.clone(), ns),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    // kube-runtime's default: no limit on concurrent reconciles.
    ctx.metrics.standard.controller_started(CRON_CONTROLLER, 0);
    Controller::new(crons, watcher::Config::default())
        .owns(workflows, watcher::Config::default().labels(LABEL))
        .graceful_shutdown_on(shutdown)
        .run(counted, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

fn error_policy(cw: Arc<CronWorkflow>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(cron_workflow = %cw.name_any(), "reconcile failed, retrying: {err}");
    Action::requeue(Duration::from_secs(1))
}

/// [`reconcile`], counted in controller-runtime's reconcile metrics
/// under `controller="cronworkflow"`.
async fn counted(cw: Arc<CronWorkflow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let standard = &ctx.metrics.standard;
    standard.worker_started(CRON_CONTROLLER);
    let started = std::time::Instant::now();
    let result = reconcile(cw, ctx.clone()).await;
    let label = match &result {
        Ok(action) if *action == Action::await_change() => "success",
        Ok(_) => "requeue_after",
        Err(_) => "error",
    };
    standard.worker_finished(CRON_CONTROLLER, label, started.elapsed());
    result
}

/// One look at one CronWorkflow.
pub async fn reconcile(cw: Arc<CronWorkflow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = cw.namespace().unwrap_or_default();
    let name = cw.name_any();
    let owned = ctx
        .shard
        .as_ref()
        .is_none_or(|s| s.owns(&ns, &name, cw.labels()));
    if !owned || cw.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let spec = &cw.spec.spec;
    let old = cw.status.clone().unwrap_or_default();
    let schedule = match Schedule::parse(&spec.schedule, spec.timezone.as_deref()) {
        Ok(s) => s,
        Err(why) => {
            if old.message.as_deref() != Some(why.as_str()) {
                let status = CronWorkflowStatus {
                    message: Some(why.clone()),
                    ..old.clone()
                };
                write_status(&ctx, &cw, &old, &status).await?;
                record_event(
                    &ctx.client,
                    &ctx.metrics,
                    &*cw,
                    "Warning",
                    "InvalidSchedule",
                    &why,
                )
                .await;
            }
            return Ok(Action::await_change());
        }
    };
    let workflows: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    let mine = launched_by(&workflows, &cw).await?;
    let mut active: Vec<String> = mine
        .iter()
        .filter(|w| !w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
        .map(|w| w.name_any())
        .collect();
    let now = SystemTime::now();
    let created = cw
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| SystemTime::from(t.0))
        .unwrap_or(now);
    // The status may come from a watch cache that lags behind this
    // controller's own last write; the Workflows listed from the API say
    // which ticks already ran, so a lagging status never re-plans one
    // (which under Replace would abort the Workflow just launched for it).
    let last_scheduled = parse_timestamp(old.last_scheduled_time.as_deref())
        .into_iter()
        .chain(mine.iter().filter_map(|w| tick_of(&name, w)))
        .max();
    let plan = cron::plan(&PlanInput {
        schedule: &schedule,
        now,
        last_scheduled,
        created,
        starting_deadline: spec.starting_deadline_seconds.map(Duration::from_secs),
        concurrency: spec.concurrency_policy,
        suspended: spec.suspend,
        active: &active,
    });
    for running in &plan.abort {
        let patch = json!({"spec": {"abort": true}});
        workflows
            .patch(running, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let why = format!("aborted workflow {running} for a new tick (concurrencyPolicy Replace)");
        record_event(&ctx.client, &ctx.metrics, &*cw, "Normal", "Replaced", &why).await;
    }
    for &tick in &plan.launch {
        if let Some(wf) = launch(&ctx, &cw, tick).await? {
            active.push(wf);
        }
    }
    if !plan.skipped.is_empty() {
        let described: Vec<String> = plan
            .skipped
            .iter()
            .take(5)
            .map(|(t, why)| format!("{}: {why}", timestamp(*t)))
            .collect();
        let more = plan.skipped.len().saturating_sub(5);
        let tail = if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        };
        let msg = format!(
            "skipped {} tick(s): {}{tail}",
            plan.skipped.len(),
            described.join("; ")
        );
        record_event(
            &ctx.client,
            &ctx.metrics,
            &*cw,
            "Warning",
            "SkippedTicks",
            &msg,
        )
        .await;
    }
    active.retain(|a| !plan.abort.contains(a));
    let status = CronWorkflowStatus {
        last_scheduled_time: plan
            .last_scheduled
            .map(timestamp)
            .or(old.last_scheduled_time.clone()),
        next_scheduled_time: plan.next.map(timestamp),
        active,
        message: None,
    };
    write_status(&ctx, &cw, &old, &status).await?;
    prune(&ctx, &workflows, &cw, &mine).await;
    Ok(match plan.next {
        // Looked at again at the next tick (and whenever one of its
        // Workflows changes); at least every five minutes, so a clock
        // that jumps is noticed.
        Some(next) => {
            let wait = next.duration_since(SystemTime::now()).unwrap_or_default();
            Action::requeue(wait.min(Duration::from_secs(300)) + Duration::from_millis(5))
        }
        None => Action::await_change(),
    })
}

/// The tick a Workflow was launched for, if it is a tick's (not a
/// `weft cron trigger` run): its annotation, and the name of that tick.
fn tick_of(cron: &str, wf: &Workflow) -> Option<SystemTime> {
    let at = parse_timestamp(wf.annotations().get(SCHEDULED_TIME).map(String::as_str))?;
    (wf.name_any() == cron::workflow_name(cron, at)).then_some(at)
}

/// The Workflows this CronWorkflow launched (its label and owner).
async fn launched_by(api: &Api<Workflow>, cw: &CronWorkflow) -> Result<Vec<Workflow>, Error> {
    let lp = ListParams::default().labels(&format!("{LABEL}={}", cw.name_any()));
    let uid = cw.uid();
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|w| {
            w.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == uid.as_ref())
        })
        .collect())
}

/// Creates the Workflow of `tick`; its name, or `None` when the API server
/// refused it (an Event says why; the tick is not retried: the next one
/// would be refused the same way). A Workflow already there is this
/// tick's, created before a crash or by another leader: done.
async fn launch(
    ctx: &Context,
    cw: &CronWorkflow,
    tick: SystemTime,
) -> Result<Option<String>, Error> {
    let ns = cw.namespace().unwrap_or_default();
    let name = cron::workflow_name(&cw.name_any(), tick);
    let when = timestamp(tick);
    let wf = workflow_for(&ctx.client, cw, tick, &name).await?;
    let api: Api<Workflow> = Api::namespaced(ctx.client.clone(), &ns);
    let pp = PostParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    };
    match api.create(&pp, &wf).await {
        Ok(_) => {
            ctx.metrics.api_write("workflow");
            let msg = format!("launched workflow {name} for the tick at {when}");
            record_event(&ctx.client, &ctx.metrics, cw, "Normal", "Launched", &msg).await;
            Ok(Some(name))
        }
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Some(name)),
        Err(kube::Error::Api(s)) if (400..500).contains(&s.code) => {
            let msg = format!(
                "cannot launch workflow {name} for the tick at {when}: {}",
                s.message
            );
            record_event(
                &ctx.client,
                &ctx.metrics,
                cw,
                "Warning",
                "LaunchFailed",
                &msg,
            )
            .await;
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The Workflow a CronWorkflow launches for `tick` (`weft cron trigger`
/// makes one for now): its spec with the tick's time given, its label,
/// annotation and owner. `name` ending in `-` is a generateName.
pub async fn workflow_for(
    client: &kube::Client,
    cw: &CronWorkflow,
    tick: SystemTime,
    name: &str,
) -> Result<Workflow, Error> {
    let ns = cw.namespace().unwrap_or_default();
    let when = timestamp(tick);
    let mut spec = cw.spec.spec.workflow_spec.clone();
    give_scheduled_time(client, &ns, &mut spec, &when).await?;
    let mut wf = Workflow::new(name, WorkflowResourceSpec { spec });
    if name.ends_with('-') {
        wf.metadata.name = None;
        wf.metadata.generate_name = Some(name.to_string());
    }
    wf.metadata.namespace = Some(ns);
    wf.metadata.labels = Some([(LABEL.to_string(), cw.name_any())].into());
    wf.metadata.annotations = Some([(SCHEDULED_TIME.to_string(), when)].into());
    wf.metadata.owner_references = cw.controller_owner_ref(&()).map(|o| vec![o]);
    Ok(wf)
}

/// Gives the tick's time as the input `scheduledTime` when the workflow,
/// or the template it launches, declares it.
async fn give_scheduled_time(
    client: &kube::Client,
    ns: &str,
    spec: &mut weft_dag::WorkflowSpec,
    when: &str,
) -> Result<(), Error> {
    let key = cron::SCHEDULED_TIME_INPUT;
    match &mut spec.workflow_template_ref {
        Some(r) if !r.inputs.contains_key(key) => {
            let templates: Api<WorkflowTemplate> = Api::namespaced(client.clone(), ns);
            let declared = templates
                .get_opt(&r.name)
                .await?
                .is_some_and(|t| t.spec.spec.workflow.inputs.contains_key(key));
            if declared {
                r.inputs.insert(key.into(), when.into());
            }
        }
        Some(_) => {}
        None => {
            if let Some(decl) = spec.inputs.get_mut(key) {
                *decl = decl.with_default(when.into());
            }
        }
    }
    Ok(())
}

async fn write_status(
    ctx: &Context,
    cw: &CronWorkflow,
    old: &CronWorkflowStatus,
    new: &CronWorkflowStatus,
) -> Result<(), Error> {
    let api: Api<CronWorkflow> =
        Api::namespaced(ctx.client.clone(), &cw.namespace().unwrap_or_default());
    super::patch_status(&api, &cw.name_any(), old, new, ctx).await?;
    Ok(())
}

/// Deletes finished Workflows beyond the history limits, oldest first.
async fn prune(ctx: &Context, api: &Api<Workflow>, cw: &CronWorkflow, mine: &[Workflow]) {
    let spec = &cw.spec.spec;
    let keep_ok = spec
        .successful_jobs_history_limit
        .unwrap_or(cron::DEFAULT_SUCCESSFUL_HISTORY) as usize;
    let keep_bad = spec
        .failed_jobs_history_limit
        .unwrap_or(cron::DEFAULT_FAILED_HISTORY) as usize;
    let mut finished: Vec<&Workflow> = mine
        .iter()
        .filter(|w| w.status.as_ref().is_some_and(|s| s.phase.is_terminal()))
        .collect();
    // Newest first: names end in the tick's seconds, but ticks of
    // different lengths compare wrongly as text; the annotation is exact.
    finished.sort_by_key(|w| {
        std::cmp::Reverse(parse_timestamp(
            w.annotations().get(SCHEDULED_TIME).map(String::as_str),
        ))
    });
    let (ok, bad): (Vec<&Workflow>, Vec<&Workflow>) = finished.into_iter().partition(|w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase == WorkflowPhase::Succeeded)
    });
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    for old in ok.iter().skip(keep_ok).chain(bad.iter().skip(keep_bad)) {
        match api.delete(&old.name_any(), &dp).await {
            Ok(_) => ctx.metrics.api_write("workflow"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => tracing::warn!(workflow = %old.name_any(), "cannot delete past run: {e}"),
        }
    }
}
