//! OpenTelemetry traces: the real `weft controller` with
//! `--otlp-endpoint` exports its spans over OTLP/gRPC to a collector (a
//! tonic server speaking the OTLP trace service, here in the test), and a
//! workflow's reconcile is one trace: reconcile → plugin call, child apply
//! and status patch as its children.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{ControllerProcess, free_port};
use kube::Api;
use kube::api::PostParams;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::trace::v1::Span;
use weft::api::Workflow;

/// Keeps every span it is sent.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<Span>>>);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.0.lock().unwrap();
        for rs in request.into_inner().resource_spans {
            for ss in rs.scope_spans {
                spans.extend(ss.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    span.attributes
        .iter()
        .find(|a| a.key == key)
        .and_then(|a| a.value.as_ref())
        .and_then(|v| match &v.value {
            Some(Value::StringValue(s)) => Some(s.clone()),
            _ => None,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_is_one_trace_from_reconcile_to_plugin_call_and_apply() {
    let collector = Collector::default();
    let port = free_port();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve(([127, 0, 0, 1], port).into()),
    );

    let (_dir, cluster, kubeconfig, client) = common::dev_cluster().await;
    let endpoint = format!("--otlp-endpoint=http://127.0.0.1:{port}");
    let mut controller = ControllerProcess::start(&kubeconfig, "traced", &[&endpoint]);

    let spec: weft_dag::WorkflowSpec = serde_yaml::from_str(
        "nodes:\n  - {id: hello, task: {type: pod, config: {image: busybox, command: [sh, -c, 'echo hi']}}}\n",
    )
    .unwrap();
    let api: Api<Workflow> = Api::namespaced(client.clone(), "default");
    api.create(
        &PostParams::default(),
        &Workflow::new("traced", weft::api::WorkflowResourceSpec { spec }),
    )
    .await
    .unwrap();
    let mut done = false;
    for _ in 0..600 {
        let wf = api.get("traced").await.unwrap();
        if wf.status.is_some_and(|s| s.phase.is_terminal()) {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(done, "the workflow did not finish:\n{}", controller.log());
    // A graceful stop flushes what the batch processor still holds.
    controller.terminate();

    let spans = collector.0.lock().unwrap().clone();
    let by_id: HashMap<Vec<u8>, &Span> = spans.iter().map(|s| (s.span_id.clone(), s)).collect();
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let reconciles = named("reconcile");
    assert!(
        reconciles
            .iter()
            .any(|s| attribute(s, "workflow").as_deref() == Some("traced")),
        "no reconcile span for the workflow; got {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    // Each span below hangs, through its parents, off a reconcile of the
    // same trace.
    let root_of = |s: &Span| -> Option<String> {
        let mut cur = s;
        for _ in 0..10 {
            if cur.name == "reconcile" {
                return attribute(cur, "workflow");
            }
            cur = by_id.get(&cur.parent_span_id)?;
            assert_eq!(cur.trace_id, s.trace_id, "a parent in another trace");
        }
        None
    };
    for (name, call) in [
        ("plugin.call", Some("build-resource")),
        ("plugin.call", Some("get-task-phase")),
        ("child.apply", None),
        ("status.patch", None),
    ] {
        let found = named(name)
            .into_iter()
            .filter(|s| call.is_none() || attribute(s, "call").as_deref() == call)
            .any(|s| root_of(s).as_deref() == Some("traced"));
        assert!(
            found,
            "no {name} {call:?} span under the workflow's reconcile"
        );
    }
    let call = named("plugin.call")[0];
    assert_eq!(attribute(call, "plugin").as_deref(), Some("pod"));
    server.abort();
    cluster.shutdown().await;
}
