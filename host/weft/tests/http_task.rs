//! The `http` web-API plugin (plugins/http, Argo's HTTP template) end to
//! end: a real loopback HTTP server in the test, a real dev cluster (or
//! kube-apiserver, `WEFT_TEST_CLUSTER=k8s`) and a real `weft controller` process with the first-party plugins, Workflows
//! created with kubectl.
//!
//! Checked from the server's side (what it received, and how often) and
//! from the Workflow's status: a POST with a JSON body whose outputs come
//! from CEL over the JSON answer feeds a downstream node's URL and body
//! through `${nodes.a.outputs.x}`; each attempt sends its request exactly
//! once, with the attempt's `Idempotency-Key`; a failing successCondition
//! fails the node naming the URL and status (and a retry sends a new
//! request with its own key); bad CEL fails before anything is sent; an
//! answer over the manifest's 1 MiB cap fails the node; a
//! request outside the operator's narrowed allow-list is denied naming
//! the URL while the server there sees no connection.

mod common;

use std::{net::TcpListener, path::Path, time::Duration};

use common::loopback::{Seen, Server};
use kube::api::Api;
use serde_json::{Value, json};
use weft::api::Workflow;
use weft_dag::{NodePhase, WorkflowPhase};

/// The server's API: orders are created, confirmed; `/busy` is never ready.
fn orders(req: &Seen) -> (u16, Value) {
    match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/orders") => (
            201,
            json!({"id": 7, "total": 42.5, "state": "accepted", "item": req.json()["item"]}),
        ),
        ("PUT", "/orders/7/confirm") => (
            200,
            json!({"confirmed": true, "total": req.json()["total"]}),
        ),
        ("POST", "/busy") => (503, json!({"error": "busy, try later"})),
        // 2 MiB: over the manifest's egress.maxResponse (1Mi).
        ("GET", "/big") => (200, json!({"blob": "x".repeat(2 << 20)})),
        _ => (404, json!({"error": "no such route"})),
    }
}

async fn create(kubeconfig: &Path, name: &str, spec: &str) {
    let yaml = format!(
        "apiVersion: weft.dev/v1alpha1\nkind: Workflow\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    );
    common::kubectl_ok(kubeconfig, &["create", "-f", "-"], Some(&yaml)).await;
}

async fn finished(api: &Api<Workflow>, name: &str) -> Workflow {
    for _ in 0..60 * 5 {
        if let Ok(wf) = api.get(name).await
            && wf.status.as_ref().is_some_and(|s| s.phase.is_terminal())
        {
            return wf;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{name}: not finished in 60 s: {:?}",
        api.get(name).await.ok().and_then(|w| w.status)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_tasks_send_once_chain_outputs_fail_by_condition_and_stay_in_their_lane() {
    let server = Server::start(orders);
    let port = server.port;
    let bed = common::cluster::Bed::start().await;
    let (kubeconfig, client) = (bed.kubeconfig.clone(), bed.client.clone());
    // The operator narrows the plugin to the server: GET, POST and PUT on
    // its port only.
    let registry_config = bed.path("registry.yaml");
    std::fs::write(
        &registry_config,
        format!(
            "plugins:\n  http:\n    config:\n      egress:\n        allow: [{{host: 127.0.0.1, ports: [{port}], methods: [GET, POST, PUT], schemes: [http]}}]\n"
        ),
    )
    .unwrap();
    let args = [
        "--plugin-namespace",
        &bed.ns,
        "--registry-config",
        registry_config.to_str().unwrap(),
    ];
    let controller = bed.controller("http", &args);
    controller.metrics().await;
    let api: Api<Workflow> = Api::default_namespaced(client.clone());

    // 1. A POST with a JSON body; its outputs, CEL over the JSON answer,
    // feed the next node's URL and body through its inputs.
    let chain = r#"  inputs:
    item: {type: string, default: widget}
  nodes:
    - id: a
      inputs: {item: '${inputs.item}'}
      task:
        type: http
        config:
          method: POST
          url: 'http://127.0.0.1:PORT/orders'
          headers: {X-Team: ml}
          body: {item: '${inputs.item}', qty: 3}
          successCondition: "response.status == 201 && response.json.state == 'accepted'"
          outputs:
            id: response.json.id
            total: response.json.total + 0.25
            type: "response.headers['content-type']"
    - id: b
      dependsOn: [a]
      inputs: {id: '${nodes.a.outputs.id}', total: '${nodes.a.outputs.total}'}
      task:
        type: http
        config:
          method: PUT
          url: 'http://127.0.0.1:PORT/orders/${inputs.id}/confirm'
          body: {total: '${inputs.total}', note: 'order ${inputs.id}'}
          outputs: {confirmed: response.json.confirmed, echoed: response.json.total, id: inputs.id}
"#
    .replace("PORT", &port.to_string());
    create(&kubeconfig, "http-chain", &chain).await;
    let wf = finished(&api, "http-chain").await;
    let st = wf.status.unwrap();
    assert_eq!(st.phase, WorkflowPhase::Succeeded, "{st:?}");
    let a = &st.nodes["a"];
    assert_eq!(
        Value::Object(a.outputs.clone().unwrap()),
        json!({"id": 7, "total": 42.75, "type": "application/json"})
    );
    let r = a.resource.as_ref().unwrap();
    assert_eq!(
        (r.kind.as_str(), r.name.as_str()),
        ("http", "http-chain-a-0")
    );
    assert_eq!(
        Value::Object(st.nodes["b"].outputs.clone().unwrap()),
        json!({"confirmed": true, "echoed": 42.75, "id": 7})
    );
    let posts = server.seen("POST", "/orders");
    assert_eq!(posts.len(), 1, "one request for a's one attempt: {posts:?}");
    let post = &posts[0];
    assert_eq!(post.key(), "http-chain-a-0");
    assert_eq!(post.headers["x-team"], "ml");
    assert_eq!(post.headers["content-type"], "application/json");
    assert_eq!(post.json(), json!({"item": "widget", "qty": 3}));
    let puts = server.seen("PUT", "/orders/7/confirm");
    assert_eq!(puts.len(), 1, "{puts:?}");
    assert_eq!(puts[0].key(), "http-chain-b-0");
    assert_eq!(puts[0].json(), json!({"total": 42.75, "note": "order 7"}));
    // get only reads the verdict: nothing more reaches the server.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(server.count(), 2);
    let out = common::kubectl_ok(
        &kubeconfig,
        &[
            "get",
            "workflow",
            "http-chain",
            "-o",
            "jsonpath={.status.nodes.b.outputs.echoed}",
        ],
        None,
    )
    .await;
    assert_eq!(out.trim(), "42.75");

    // 2. A failing successCondition fails the node naming the URL, the
    // status and the condition; a retry is a new attempt: one new request
    // with its own key.
    let busy = r#"  nodes:
    - id: c
      retries: {limit: 1, backoff: 1s}
      task:
        type: http
        config: {method: POST, url: 'http://127.0.0.1:PORT/busy', body: ping}
"#
    .replace("PORT", &port.to_string());
    create(&kubeconfig, "http-busy", &busy).await;
    let wf = finished(&api, "http-busy").await;
    let st = wf.status.unwrap();
    assert_eq!(st.phase, WorkflowPhase::Failed);
    let c = &st.nodes["c"];
    assert_eq!(c.phase, NodePhase::Failed);
    let msg = c.message.as_deref().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "POST {} answered 503: successCondition \"response.status >= 200 && response.status < 300\" is false",
            server.url("/busy")
        )) && msg.contains("busy, try later"),
        "{msg}"
    );
    let tries = server.seen("POST", "/busy");
    let keys: Vec<&str> = tries.iter().map(Seen::key).collect();
    assert_eq!(keys, ["http-busy-c-0", "http-busy-c-1"], "once per attempt");
    for t in &tries {
        assert_eq!(t.body, b"ping");
        assert!(!t.headers.contains_key("content-type"), "{t:?}");
    }

    // 3. Bad CEL fails the node naming the field, before anything is sent.
    let bad = r#"  nodes:
    - id: d
      task:
        type: http
        config: {url: 'http://127.0.0.1:PORT/bad', outputs: {total: 'response.json.total +'}}
"#
    .replace("PORT", &port.to_string());
    create(&kubeconfig, "http-bad-cel", &bad).await;
    let wf = finished(&api, "http-bad-cel").await;
    let d = &wf.status.unwrap().nodes["d"];
    assert_eq!(d.phase, NodePhase::Failed);
    let msg = d.message.as_deref().unwrap_or_default();
    assert!(
        msg.contains("outputs.total: \"response.json.total +\" is not valid CEL"),
        "{msg}"
    );
    assert!(server.seen("GET", "/bad").is_empty());

    // 3b. An answer over the manifest's egress.maxResponse (1 MiB) fails
    // the node for good, naming the URL and the limit.
    let big = format!(
        "  nodes:\n    - {{id: g, task: {{type: http, config: {{url: '{}'}}}}}}\n",
        server.url("/big")
    );
    create(&kubeconfig, "http-big", &big).await;
    let wf = finished(&api, "http-big").await;
    let g = &wf.status.unwrap().nodes["g"];
    assert_eq!(g.phase, NodePhase::Failed);
    let msg = g.message.as_deref().unwrap_or_default();
    assert!(
        msg.contains(&server.url("/big")) && msg.contains("over the limit of 1048576 bytes"),
        "{msg}"
    );
    assert_eq!(server.seen("GET", "/big").len(), 1);

    // 4. Outside the operator's allow-list: another address, and a method
    // the operator left out on the server's own port. Both are denied
    // naming the URL; neither reaches a server.
    let trap = TcpListener::bind("127.0.0.2:0").unwrap();
    trap.set_nonblocking(true).unwrap();
    let elsewhere = format!("http://127.0.0.2:{}/x", trap.local_addr().unwrap().port());
    create(
        &kubeconfig,
        "http-denied",
        &format!(
            "  nodes:\n    - {{id: e, task: {{type: http, config: {{url: '{elsewhere}'}}}}}}\n"
        ),
    )
    .await;
    create(
        &kubeconfig,
        "http-denied-method",
        &format!(
            "  nodes:\n    - {{id: f, task: {{type: http, config: {{method: DELETE, url: '{}'}}}}}}\n",
            server.url("/orders/7")
        ),
    )
    .await;
    for (name, id, denied) in [
        ("http-denied", "e", format!("may not GET {elsewhere}")),
        (
            "http-denied-method",
            "f",
            format!("may not DELETE {}", server.url("/orders/7")),
        ),
    ] {
        let wf = finished(&api, name).await;
        let n = &wf.status.unwrap().nodes[id];
        assert_eq!(n.phase, NodePhase::Failed);
        let msg = n.message.as_deref().unwrap_or_default();
        assert!(
            msg.contains(&denied) && msg.contains("operator's egress.allow"),
            "{msg}"
        );
    }
    assert!(
        trap.accept().is_err(),
        "a connection reached the denied address"
    );
    assert!(server.seen("DELETE", "/orders/7").is_empty());
    assert_eq!(server.count(), 5, "nothing but the allowed requests");
    drop(controller);
}
