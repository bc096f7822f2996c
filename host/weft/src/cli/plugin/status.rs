//! `weft plugin status`, `promote` and `abort`: what the loaders report of
//! each plugin, and the end of a roll-out.

use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};

use super::client;
use crate::hotload::PluginStatus;

/// Arguments of `weft plugin status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this namespace (default: all).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also print each roll-out: routed workflows, and a shadow's
    /// differences from the serving version (counts and samples).
    #[arg(long)]
    pub diff: bool,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long)]
    pub server: Option<String>,
}

pub(super) fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = client(args.server.as_deref()).await?;
        let rows = crate::hotload::read_status(&client, args.namespace.as_deref()).await?;
        if args.json {
            let v: Vec<Value> = rows
                .iter()
                .map(|(ns, name, st, desired)| {
                    json!({"namespace": ns, "configMap": name, "desired": desired, "status": st})
                })
                .collect();
            crate::cli::out(&serde_json::to_string_pretty(&v)?)?;
            return Ok(ExitCode::SUCCESS);
        }
        let mut out = format!(
            "{:<28} {:<16} {:<10} {:<8} {:<12} {:<12} {:<7} {:<4} {:<24} {}\n",
            "CONFIGMAP",
            "PLUGIN",
            "STATE",
            "VERSION",
            "SERVING",
            "DESIRED",
            "PINNING",
            "PINS",
            "RETAINED",
            "BREAKER / ERROR"
        );
        let rows_for_diff: Vec<(String, String, Option<PluginStatus>)> = rows
            .iter()
            .map(|(ns, name, st, _)| (ns.clone(), name.clone(), st.clone()))
            .collect();
        for (ns, name, st, desired) in rows {
            let st = st.unwrap_or_default();
            let retained = st
                .retained
                .iter()
                .map(|r| format!("{}({} pins)", short(&Some(r.digest.clone())), r.pins))
                .collect::<Vec<_>>()
                .join(",");
            let mut note = Vec::new();
            if let Some(b) = &st.breaker {
                note.push(format!(
                    "tripped {} after {} faults -> {}",
                    short(&Some(b.tripped.clone())),
                    b.faults,
                    short(&b.rolled_back_to)
                ));
            }
            if let Some(e) = &st.error {
                note.push(format!("rejected: {e}"));
            } else if let Some(c) = &st.conflict {
                note.push(c.clone());
            }
            // The annotation is the controller's word; none at all, or one
            // about another digest, means no controller has seen this one.
            let state = match (&st.desired, &desired) {
                _ if st.state.is_empty() => "unseen",
                (Some(seen), Some(now)) if seen != now => "unseen",
                _ => st.state.as_str(),
            };
            if state == "unseen" {
                note.push(
                    "no controller has seen this version (is one watching this namespace?)".into(),
                );
            }
            out.push_str(&format!(
                "{:<28} {:<16} {:<10} {:<8} {:<12} {:<12} {:<7} {:<4} {:<24} {}\n",
                format!("{ns}/{name}"),
                if st.plugin.is_empty() {
                    "-"
                } else {
                    st.plugin.as_str()
                },
                state,
                st.version.as_deref().unwrap_or("-"),
                short(&st.serving),
                short(&desired.or(st.desired.clone())),
                if st.pinning.is_empty() {
                    "-"
                } else {
                    st.pinning.as_str()
                },
                st.pins,
                if retained.is_empty() {
                    "-".into()
                } else {
                    retained
                },
                note.join("; ")
            ));
        }
        if args.diff {
            out.push_str(&rollouts(&rows_for_diff));
        }
        crate::cli::out(&out)?;
        Ok(ExitCode::SUCCESS)
    })
}

/// `status --diff`: each roll-out, with a shadow's differences.
pub(super) fn rollouts(rows: &[(String, String, Option<PluginStatus>)]) -> String {
    let mut out = String::new();
    for (ns, name, st) in rows {
        let Some(r) = st.as_ref().and_then(|s| s.rollout.as_ref()) else {
            continue;
        };
        out.push_str(&format!(
            "\n{ns}/{name}: {} {} ({}) — {} of {} new workflows on it\n",
            r.mode,
            r.version,
            short(&Some(r.candidate.clone())),
            r.to_candidate,
            r.routed
        ));
        if let Some(sh) = &r.shadow {
            out.push_str(&format!(
                "  shadow calls {}, differing {}, candidate failed {}\n",
                sh.calls, sh.diffs, sh.errors
            ));
            for d in &sh.samples {
                out.push_str(&format!("  - {d}\n"));
            }
        }
    }
    if out.is_empty() {
        out.push_str("\nno roll-out under way\n");
    }
    out
}

/// Arguments of `weft plugin promote` and `weft plugin abort`.
#[derive(Debug, Args)]
pub struct RolloutArgs {
    /// The plugin (its head ConfigMap is found by the weft.dev/plugin label).
    pub plugin: String,
    /// The namespace of its ConfigMap.
    #[arg(short, long, default_value_t = crate::cli::context_namespace(), hide_default_value = true)]
    pub namespace: String,
    /// API server URL (default: kubeconfig, as kubectl finds it).
    #[arg(long)]
    pub server: Option<String>,
}

/// `weft plugin promote` (`promote`) or `abort`: edits the head's
/// `data.rollout`; the controller does the rest and records an Event.
pub(super) fn end_rollout(args: RolloutArgs, promote: bool) -> anyhow::Result<ExitCode> {
    use crate::hotload::package::{KEY_CANARY_PERCENT, KEY_ROLLOUT};
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let client = client(args.server.as_deref()).await?;
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client, &args.namespace);
        let head = crate::hotload::rollout::find_head(&api, &args.plugin).await?;
        let data = head.data.clone().unwrap_or_default();
        match data.get(KEY_ROLLOUT).map(String::as_str) {
            Some("shadow" | "canary") => {}
            other => anyhow::bail!(
                "plugin {} in {} has no roll-out under way (data.{KEY_ROLLOUT} is {other:?}): push one with --shadow or --canary",
                args.plugin,
                args.namespace
            ),
        }
        let patch = if promote {
            json!({"data": {KEY_ROLLOUT: null, KEY_CANARY_PERCENT: null}})
        } else {
            json!({"data": {KEY_ROLLOUT: "aborted"}})
        };
        use kube::ResourceExt as _;
        api.patch(
            &head.name_any(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await?;
        crate::cli::out(&format!(
            "configmap {}/{}: {} {}",
            args.namespace,
            head.name_any(),
            if promote { "promoting" } else { "aborting" },
            data.get(crate::hotload::package::KEY_DIGEST)
                .map(String::as_str)
                .unwrap_or("the candidate")
        ))?;
        Ok(ExitCode::SUCCESS)
    })
}

pub(super) fn short(d: &Option<String>) -> String {
    d.as_deref()
        .map(|d| d.trim_start_matches("sha256:").chars().take(12).collect())
        .unwrap_or_else(|| "-".into())
}
