//! The admin API end to end: a real tonic client over a real socket, the
//! real middleware components built from plugins/, the controller and the
//! dev cluster.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Env, root};
use futures::StreamExt;
use serde_json::{Value, json};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};
use tonic::{Code, Request};
use weft::admin::{self, AdminConfig, Authorization, pb};
use weft_plugin::{Plugin, PluginEngine, manifest::Manifest};

type Client = pb::admin_service_client::AdminServiceClient<Channel>;

const HELLO: &str = r#"{"nodes": [{"id": "greet", "task": {"type": "pod", "config": {"image": "busybox", "command": ["sh", "-c", "echo hi; printf '{\"n\": 1}' > /dev/termination-log"]}}}]}"#;

struct Admin {
    client: Client,
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Admin {
    async fn start(env: &Env, config: AdminConfig) -> Admin {
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let server = admin::serve(
            &config,
            env.client.clone(),
            env.registry.clone(),
            env.ctx.metrics.clone(),
            async {
                let _ = rx.await;
            },
        )
        .await
        .expect("admin server");
        let client = Client::connect(format!("http://{}", server.addr))
            .await
            .expect("connect");
        Admin {
            client,
            addr: server.addr,
            stop: Some(stop),
        }
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

fn loopback() -> AdminConfig {
    AdminConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        middleware: Some(vec![]),
        ..Default::default()
    }
}

fn id(ns: &str, name: &str) -> Option<pb::ExecutionId> {
    Some(pb::ExecutionId {
        namespace: ns.into(),
        name: name.into(),
        ..Default::default()
    })
}

fn create(ns: &str, name: &str, spec: &str) -> pb::CreateExecutionRequest {
    pb::CreateExecutionRequest {
        namespace: ns.into(),
        name: name.into(),
        spec: spec.into(),
        ..Default::default()
    }
}

fn with_token<T>(msg: T, token: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

/// Replaces a middleware's configuration in the registry, as an operator's
/// manifest would.
fn configure(env: &Env, name: &str, config: Value) {
    let snapshot = env.registry.snapshot();
    let Some(Plugin::Middleware(m)) = snapshot.plugins().get(name) else {
        panic!("{name} is not loaded: build the plugins first (make guests)");
    };
    let mut m = (**m).clone();
    m.set_config_overrides(config.as_object().unwrap());
    env.registry.upsert(Plugin::Middleware(Arc::new(m)));
}

/// Loads the test middleware (plugins/testing/mw-test) with its manifest
/// edited by `edit`, under its own name.
fn load_mw_test(env: &Env, engine: &PluginEngine, edit: impl Fn(String) -> String) {
    env.registry.upsert(mw_test(engine, "", edit));
}

/// The test middleware with its manifest edited by `edit`; a non-empty
/// `salt` appends a custom section, so it is another version (digest) of
/// the same behaviour.
fn mw_test(engine: &PluginEngine, salt: &str, edit: impl Fn(String) -> String) -> Plugin {
    let dir = root().join("target/test-guests");
    let mut bytes =
        std::fs::read(dir.join("mw-test.wasm")).expect("build the test guests: make guests");
    if !salt.is_empty() {
        let name = b"weft-salt";
        bytes.extend([0, (1 + name.len() + salt.len()) as u8, name.len() as u8]);
        bytes.extend(name);
        bytes.extend(salt.as_bytes());
    }
    let text = edit(std::fs::read_to_string(dir.join("mw-test.yaml")).unwrap());
    let manifest = Manifest::parse(&text, "mw-test.yaml").unwrap();
    Plugin::load(engine, &bytes, manifest, "mw-test.wasm")
        .unwrap()
        .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_then_watch_to_completion_and_list_and_get() {
    let env = Env::start().await;
    let mut admin = Admin::start(&env, loopback()).await;

    // It naps longer than the status hold (--status-hold, 2 s), so the
    // stream has a running phase to show.
    let napping = HELLO.replace("echo hi;", "sleep 3; echo hi;");
    let mut req = create(&env.ns, "", &napping);
    req.generate_name = "hello-".into();
    req.labels.insert("team".into(), "ml".into());
    let created = admin.client.create_execution(req).await.unwrap();
    assert!(created.metadata().get("x-request-id").is_some());
    let created = created.into_inner();
    let name = created.id.clone().unwrap().name;
    assert!(name.starts_with("hello-"), "{name}");
    assert_eq!(created.nodes[0].id, "greet");

    let mut stream = admin
        .client
        .watch_execution(pb::WatchExecutionRequest {
            id: id(&env.ns, &name),
        })
        .await
        .unwrap()
        .into_inner();
    let mut phases = Vec::new();
    let last = tokio::time::timeout(Duration::from_secs(60), async {
        let mut last = None;
        while let Some(item) = stream.next().await {
            let ex = item.expect("stream item");
            // An update is a change of a phase or of the plugin's sub-phase.
            let node = &ex.nodes[0];
            phases.push(format!("{}/{}:{}", ex.phase, node.phase, node.task_phase));
            last = Some(ex);
        }
        last
    })
    .await
    .expect("the stream ends when the execution ends")
    .expect("at least one update");
    assert_eq!(last.phase, "Succeeded", "{phases:?}");
    assert_eq!(last.nodes[0].outputs, r#"{"n":1}"#);
    assert!(
        phases.iter().any(|p| p.starts_with("Running")),
        "the stream showed it running: {phases:?}"
    );
    let unique: std::collections::BTreeSet<_> = phases.iter().collect();
    assert_eq!(
        unique.len(),
        phases.len(),
        "no repeated updates: {phases:?}"
    );

    let got = admin
        .client
        .get_execution(pb::GetExecutionRequest {
            id: id(&env.ns, &name),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.phase, "Succeeded");
    assert!(!got.finished_at.is_empty());

    // Two more; a label selector and pagination.
    for n in ["page-a", "page-b"] {
        admin
            .client
            .create_execution(create(&env.ns, n, HELLO))
            .await
            .unwrap();
    }
    let ml = admin
        .client
        .list_executions(pb::ListExecutionsRequest {
            namespace: env.ns.clone(),
            label_selector: "team=ml".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ml.executions.len(), 1);
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = admin
            .client
            .list_executions(pb::ListExecutionsRequest {
                namespace: env.ns.clone(),
                limit: 2,
                page_token: token.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.executions.len() <= 2);
        seen.extend(page.executions.into_iter().map(|e| e.id.unwrap().name));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    seen.sort();
    assert_eq!(seen.len(), 3, "{seen:?}");

    // The standard health service.
    let channel = Channel::from_shared(format!("http://{}", admin.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "weft.admin.v1.AdminService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.status, 1, "SERVING");

    // Server reflection: what grpcurl asks first.
    use tonic_reflection::pb::v1 as reflection;
    let channel = Channel::from_shared(format!("http://{}", admin.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut refl = reflection::server_reflection_client::ServerReflectionClient::new(channel);
    let ask = reflection::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            reflection::server_reflection_request::MessageRequest::ListServices(String::new()),
        ),
    };
    let mut answers = refl
        .server_reflection_info(futures::stream::iter([ask]))
        .await
        .unwrap()
        .into_inner();
    let Some(reflection::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answers.next().await.unwrap().unwrap().message_response
    else {
        panic!("not a service list");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    for want in ["weft.admin.v1.AdminService", "grpc.health.v1.Health"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    // The same through reflection v1alpha (grpcio-reflection, grpcui).
    {
        use tonic_reflection::pb::v1alpha as old;
        let channel = Channel::from_shared(format!("http://{}", admin.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut refl = old::server_reflection_client::ServerReflectionClient::new(channel);
        let ask = old::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(
                old::server_reflection_request::MessageRequest::ListServices(String::new()),
            ),
        };
        let mut answers = refl
            .server_reflection_info(futures::stream::iter([ask]))
            .await
            .unwrap()
            .into_inner();
        let Some(old::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
            answers.next().await.unwrap().unwrap().message_response
        else {
            panic!("not a service list (v1alpha)");
        };
        assert!(
            list.service
                .iter()
                .any(|s| s.name == "weft.admin.v1.AdminService"),
            "{list:?}"
        );
    }

    let text = env.ctx.metrics.render();
    assert!(
        text.contains(r#"weft_grpc_requests_total{method="/weft.admin.v1.AdminService/CreateExecution",code="OK"} 3"#),
        "{text}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_errors() {
    let env = Env::start().await;
    let mut admin = Admin::start(
        &env,
        AdminConfig {
            max_message_bytes: 2048,
            ..loopback()
        },
    )
    .await;
    let c = &mut admin.client;

    let cycle = r#"{"nodes": [
        {"id": "a", "dependsOn": ["b"], "task": {"type": "pod", "config": {}}},
        {"id": "b", "dependsOn": ["a"], "task": {"type": "nosuch", "config": {}}}]}"#;
    let e = c
        .create_execution(create(&env.ns, "cyclic", cycle))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().contains("cycle"), "{}", e.message());
    assert!(e.message().contains("nosuch"), "{}", e.message());

    let e = c
        .create_execution(create(&env.ns, "broken", "nodes: [oops"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("spec: "), "{}", e.message());

    let mut both = create(&env.ns, "x", HELLO);
    both.generate_name = "x-".into();
    let e = c.create_execution(both).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    let e = c
        .get_execution(pb::GetExecutionRequest {
            id: id(&env.ns, "nope"),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let want = format!("{}/nope", env.ns);
    assert!(e.message().contains(&want), "{}", e.message());

    c.create_execution(create(&env.ns, "twice", HELLO))
        .await
        .unwrap();
    let e = c
        .create_execution(create(&env.ns, "twice", HELLO))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists);

    let huge = format!(
        r#"{{"nodes": [{{"id": "a", "task": {{"type": "pod", "config": {{"pad": "{}"}}}}}}]}}"#,
        "x".repeat(4096)
    );
    let e = c
        .create_execution(create(&env.ns, "huge", &huge))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    // The server is fine afterwards.
    c.get_execution(pb::GetExecutionRequest {
        id: id(&env.ns, "twice"),
    })
    .await
    .unwrap();
    env.stop().await;
}

/// An HS256 JWT, signed here as an identity provider would.
fn hs256(secret: &str, claims: Value) -> String {
    use base64::Engine as _;
    use hmac::Mac as _;
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let head = b64(br#"{"alg":"HS256","typ":"JWT"}"#);
    let body = b64(claims.to_string().as_bytes());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{head}.{body}").as_bytes());
    format!("{head}.{body}.{}", b64(&mac.finalize().into_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_party_middleware_chain_authenticates_authorizes_and_limits() {
    let env = Env::start().await;
    let secret = "a-shared-secret-of-at-least-32-bytes!";
    configure(
        &env,
        "auth-token",
        json!({
            "tokens": {"alice-token": "alice", "bob-token": "bob"},
            "jwt": {"hs256Secrets": [secret]},
        }),
    );
    configure(
        &env,
        "rate-limit",
        json!({"rate": 100, "burst": 100, "overrides": {"bob": {"rate": 0.01, "burst": 3}}}),
    );
    let config = AdminConfig {
        middleware: Some(
            ["request-id", "auth-token", "rate-limit", "audit"]
                .map(String::from)
                .to_vec(),
        ),
        authorization: Some(Authorization {
            principals: [
                ("alice".to_string(), vec![env.ns.clone()]),
                ("bob".to_string(), vec!["*".to_string()]),
                ("carol".to_string(), vec!["team-c".to_string()]),
            ]
            .into(),
            ..Default::default()
        }),
        ..loopback()
    };
    let mut admin = Admin::start(&env, config).await;
    let c = &mut admin.client;
    let get = |ns: &str| pb::GetExecutionRequest {
        id: id(ns, "nothing-here"),
    };

    // No token, an unknown one, a forged JWT.
    let e = c.get_execution(get(&env.ns)).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert!(e.message().contains("authorization"), "{}", e.message());
    let e = c
        .get_execution(with_token(get(&env.ns), "mallory-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let far = 4_000_000_000u64;
    let forged = hs256(
        "not-the-secret-but-just-as-long-!!!",
        json!({"sub": "alice", "exp": far}),
    );
    let e = c
        .get_execution(with_token(get(&env.ns), &forged))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);

    // Allowed: the call reaches the service (nothing there: NOT_FOUND).
    let e = c
        .get_execution(with_token(get(&env.ns), "alice-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert!(e.metadata().get("x-request-id").is_some());
    let created = c
        .create_execution(with_token(
            create(&env.ns, "by-alice", HELLO),
            "alice-token",
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(created.phase, "");
    let wf = env.workflows().get("by-alice").await.unwrap();
    assert_eq!(
        wf.metadata.annotations.unwrap()["weft.dev/created-by"],
        "alice"
    );

    // A JWT principal, and the namespaces it may act on.
    let jwt = hs256(secret, json!({"sub": "carol", "exp": far}));
    let e = c
        .get_execution(with_token(get("team-c"), &jwt))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "carol may act on team-c: {e:?}");
    let e = c
        .get_execution(with_token(get(&env.ns), &jwt))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    assert!(
        e.message().contains("carol") && e.message().contains(env.ns.as_str()),
        "{}",
        e.message()
    );
    let expired = hs256(secret, json!({"sub": "carol", "exp": 1_000_000_000u64}));
    let e = c
        .get_execution(with_token(get("team-c"), &expired))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert!(e.message().contains("expired"), "{}", e.message());

    // Over the rate: bob has a bucket of 3.
    for _ in 0..3 {
        let e = c
            .get_execution(with_token(get(&env.ns), "bob-token"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound);
    }
    let e = c
        .get_execution(with_token(get(&env.ns), "bob-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("bob"), "{}", e.message());
    // Others are not limited by bob's bucket.
    let e = c
        .get_execution(with_token(get(&env.ns), "alice-token"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);

    let text = env.ctx.metrics.render();
    for want in [
        r#"code="UNAUTHENTICATED""#,
        r#"code="PERMISSION_DENIED""#,
        r#"code="RESOURCE_EXHAUSTED""#,
        r#"plugin="audit",call="on-outcome""#,
        r#"plugin="auth-token",call="on-request""#,
    ] {
        assert!(text.contains(want), "{want} in\n{text}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulting_middleware_fails_closed_or_open_as_its_manifest_says() {
    let env = Env::start().await;
    let engine = PluginEngine::new(Default::default()).unwrap();
    load_mw_test(&env, &engine, |m| m);
    let mut admin = Admin::start(
        &env,
        AdminConfig {
            middleware: Some(vec!["mw-test".into()]),
            ..loopback()
        },
    )
    .await;
    let c = &mut admin.client;
    let get = |test: &str| {
        let mut r = Request::new(pb::GetExecutionRequest {
            id: id(&env.ns, "nothing-here"),
        });
        r.metadata_mut().insert("x-test", test.parse().unwrap());
        r
    };

    for (fault, words) in [("trap", "trapped"), ("loop", "deadline")] {
        let e = c.get_execution(get(fault)).await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{fault}: {e:?}");
        assert!(
            e.message().contains("mw-test") && e.message().contains(words),
            "{fault}: {}",
            e.message()
        );
        // The next call works.
        let e = c.get_execution(get("none")).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "after {fault}: {e:?}");
    }
    let e = c.get_execution(get("reject")).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);

    load_mw_test(&env, &engine, |m| {
        m.replace("failStrategy: closed", "failStrategy: open")
    });
    for fault in ["trap", "loop"] {
        let e = c.get_execution(get(fault)).await.unwrap_err();
        assert_eq!(
            e.code(),
            Code::NotFound,
            "fail-open lets {fault} through: {e:?}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_a_middleware_under_load_drops_no_call() {
    let env = Env::start().await;
    let engine = PluginEngine::new(Default::default()).unwrap();
    load_mw_test(&env, &engine, |m| m);
    let admin = Admin::start(
        &env,
        AdminConfig {
            middleware: Some(vec!["mw-test".into()]),
            ..loopback()
        },
    )
    .await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut callers = Vec::new();
    for _ in 0..4 {
        let mut c = admin.client.clone();
        let stop = stop.clone();
        let ns = env.ns.clone();
        callers.push(tokio::spawn(async move {
            let mut calls = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let e = c
                    .get_execution(pb::GetExecutionRequest {
                        id: id(&ns, "nothing-here"),
                    })
                    .await
                    .unwrap_err();
                assert_eq!(e.code(), Code::NotFound, "call {calls} was dropped: {e:?}");
                calls += 1;
            }
            calls
        }));
    }
    for i in 0..20 {
        let engine = engine.clone();
        let v = format!("version: 0.1.{i}");
        load_mw_test(&env, &engine, move |m| m.replace("version: 0.1.0", &v));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for c in callers {
        total += c.await.expect("no caller saw a dropped call");
    }
    assert!(total > 20, "{total} calls during 20 swaps");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_and_approve_through_the_api() {
    let env = Env::start().await;
    let mut admin = Admin::start(&env, loopback()).await;
    let c = &mut admin.client;
    let gated = r#"{"nodes": [
        {"id": "wait", "gate": {"approval": {"message": "ship it?"}}},
        {"id": "after", "dependsOn": ["wait"], "task": {"type": "pod", "config": {"image": "busybox", "command": ["true"]}}}]}"#;
    c.create_execution(create(&env.ns, "gated", gated))
        .await
        .unwrap();
    env.wait_for("gated", 30, |wf| {
        wf.status.as_ref().is_some_and(|s| {
            s.nodes
                .get("wait")
                .is_some_and(|n| n.phase == weft_dag::NodePhase::Running)
        })
    })
    .await;
    let e = c
        .approve_gate(pb::ApproveGateRequest {
            id: id(&env.ns, "gated"),
            node_id: "after".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    c.approve_gate(pb::ApproveGateRequest {
        id: id(&env.ns, "gated"),
        node_id: "wait".into(),
    })
    .await
    .unwrap();
    let wf = env.finish("gated", 60).await;
    assert_eq!(wf.status.unwrap().phase, weft_dag::WorkflowPhase::Succeeded);

    // Rejected: the gate fails with the reason, the node after never runs.
    c.create_execution(create(&env.ns, "refused", gated))
        .await
        .unwrap();
    env.wait_for("refused", 30, |wf| {
        wf.status.as_ref().is_some_and(|s| {
            s.nodes
                .get("wait")
                .is_some_and(|n| n.phase == weft_dag::NodePhase::Running)
        })
    })
    .await;
    c.reject_gate(pb::RejectGateRequest {
        id: id(&env.ns, "refused"),
        node_id: "wait".into(),
        reason: "not on a Friday".into(),
    })
    .await
    .unwrap();
    let wf = env.finish("refused", 60).await;
    let status = wf.status.unwrap();
    assert_eq!(status.phase, weft_dag::WorkflowPhase::Failed);
    let gate = &status.nodes["wait"];
    assert_eq!(gate.message.as_deref(), Some("rejected: not on a Friday"));
    assert!(
        env.pods_of("refused").await.is_empty(),
        "nothing ran after it"
    );
    let e = c
        .reject_gate(pb::RejectGateRequest {
            id: id(&env.ns, "refused"),
            node_id: "wait".into(),
            reason: "again".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");

    let slow = r#"{"nodes": [{"id": "nap", "gate": {"sleep": "1h"}}]}"#;
    c.create_execution(create(&env.ns, "slow", slow))
        .await
        .unwrap();
    let ex = c
        .abort_execution(pb::AbortExecutionRequest {
            id: id(&env.ns, "slow"),
            reason: "changed my mind".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ex.abort_requested);
    let wf = env.finish("slow", 60).await;
    assert_eq!(wf.status.unwrap().phase, weft_dag::WorkflowPhase::Aborted);
    let e = c
        .abort_execution(pb::AbortExecutionRequest {
            id: id(&env.ns, "slow"),
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates() {
    let env = Env::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let issue = |name: &str| {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = issue("localhost");
    let (client_cert, client_key) = issue("robot");
    for (f, text) in [
        ("server.pem", &server_cert),
        ("server.key", &server_key),
        ("ca.pem", &ca.pem()),
    ] {
        std::fs::write(dir.path().join(f), text).unwrap();
    }
    let config: AdminConfig = serde_yaml::from_str(&format!(
        "listen: 127.0.0.1:0\nmiddleware: []\ntls: {{cert: {0}/server.pem, key: {0}/server.key, clientCa: {0}/ca.pem}}\n",
        dir.path().display()
    ))
    .unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let server = admin::serve(
        &config,
        env.client.clone(),
        env.registry.clone(),
        env.ctx.metrics.clone(),
        async {
            let _ = rx.await;
        },
    )
    .await
    .unwrap();
    let url = format!("https://localhost:{}", server.addr.port());
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca.pem()))
        .domain_name("localhost");

    let with_cert = Channel::from_shared(url.clone())
        .unwrap()
        .tls_config(
            tls.clone()
                .identity(Identity::from_pem(&client_cert, &client_key)),
        )
        .unwrap()
        .connect()
        .await
        .unwrap();
    let e = Client::new(with_cert)
        .get_execution(pb::GetExecutionRequest {
            id: id(&env.ns, "nothing-here"),
        })
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Code::NotFound,
        "a client with a certificate is served: {e:?}"
    );

    let without = match Channel::from_shared(url)
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
    {
        Err(_) => None,
        Ok(ch) => Some(
            Client::new(ch)
                .get_execution(pb::GetExecutionRequest {
                    id: id(&env.ns, "nothing-here"),
                })
                .await
                .unwrap_err(),
        ),
    };
    if let Some(e) = without {
        // The handshake is refused: the connection breaks, never an answer.
        assert!(
            matches!(
                e.code(),
                Code::Unknown | Code::Cancelled | Code::Unavailable
            ),
            "no certificate, no service: {e:?}"
        );
        assert!(
            std::error::Error::source(&e).is_some(),
            "a transport error: {e:?}"
        );
    }
    let plain = Client::connect(format!("http://{}", server.addr)).await;
    if let Ok(mut plain) = plain {
        assert!(
            plain
                .get_execution(pb::GetExecutionRequest {
                    id: id(&env.ns, "nothing-here"),
                })
                .await
                .is_err(),
            "plaintext is refused"
        );
    }
    let _ = stop.send(());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weft_dev_serves_the_admin_api_until_sigterm() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["dev", "--admin-listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .current_dir(root())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("weft dev");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(a) = line.strip_prefix("admin API at ") {
                return a.to_string();
            }
        }
        panic!("weft dev ended without serving");
    })
    .await
    .expect("weft dev serves within a minute");
    let mut c = Client::connect(format!("http://{addr}")).await.unwrap();
    c.create_execution(create("default", "from-grpc", HELLO))
        .await
        .unwrap();
    let mut stream = c
        .watch_execution(pb::WatchExecutionRequest {
            id: id("default", "from-grpc"),
        })
        .await
        .unwrap()
        .into_inner();
    let mut last = None;
    while let Some(ex) = tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .expect("updates keep coming")
    {
        last = Some(ex.unwrap());
    }
    assert_eq!(last.unwrap().phase, "Succeeded");

    // kubectl, a real client of the same dev cluster, sees the execution.
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(dir.path().join("kubeconfig"))
        .args([
            "get",
            "workflows",
            "from-grpc",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .output()
        .expect("kubectl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Succeeded", "{out:?}");

    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("weft dev stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_breaker_rolls_a_faulting_middleware_back_or_opens_its_circuit() {
    let env = Env::start().await;
    env.registry
        .set_breaker(weft_plugin::breaker::BreakerConfig {
            max_faults: 2,
            window: Duration::from_secs(60),
        });
    let engine = PluginEngine::new(Default::default()).unwrap();
    // mw-a has a good earlier version to return to; mw-b (fail open) has none.
    let rename = |to: &'static str, extra: &'static str| {
        move |m: String| {
            m.replace("name: mw-test", &format!("name: {to}"))
                .replace("failStrategy: closed", extra)
        }
    };
    let a1 = mw_test(&engine, "a1", rename("mw-a", "failStrategy: closed"));
    let a2 = mw_test(&engine, "a2", rename("mw-a", "failStrategy: closed"));
    let (d1, d2) = (a1.digest(), a2.digest());
    env.registry.publish(a1);
    env.registry.publish(a2);
    env.registry
        .publish(mw_test(&engine, "b", rename("mw-b", "failStrategy: open")));
    let mut admin = Admin::start(
        &env,
        AdminConfig {
            middleware: Some(vec!["mw-a".into(), "mw-b".into()]),
            ..loopback()
        },
    )
    .await;
    let c = &mut admin.client;
    let get = |header: &'static str, test: &'static str| {
        let mut r = Request::new(pb::GetExecutionRequest {
            id: id(&env.ns, "nothing-here"),
        });
        r.metadata_mut().insert(header, test.parse().unwrap());
        r
    };
    let current = |name: &str| env.registry.snapshot().plugins()[name].digest();
    // mw-a and mw-b both read `x-test`: trap both at once; mw-a fails closed
    // first, so mw-b is not reached until mw-a is rolled back.
    for _ in 0..3 {
        let e = c.get_execution(get("x-test", "trap")).await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    }
    assert_eq!(current("mw-a"), d1, "rolled back from {d2} to {d1}");
    let trip = &env.registry.trips()["mw-a"];
    assert_eq!((trip.from, trip.to), (d2, Some(d1)));
    assert!(
        !env.registry.circuit_open(d2),
        "a rollback closes the circuit"
    );

    // The good version faults too: nothing earlier, so its circuit opens and
    // mw-a fails closed without being called (no deadline spent).
    for _ in 0..3 {
        let e = c.get_execution(get("x-test", "loop")).await.unwrap_err();
        assert_eq!(e.code(), Code::Unavailable);
    }
    assert!(env.registry.circuit_open(d1));
    let calls = |m: &str| {
        let series = format!(
            "weft_plugin_call_duration_seconds_count{{plugin=\"{m}\",call=\"on-request\"}}"
        );
        common::sample(&env.ctx.metrics.render(), &series).unwrap_or(0.0)
    };
    let before = calls("mw-a");
    assert!(before >= 5.0, "mw-a was called before: {before}");
    let started = std::time::Instant::now();
    let e = c.get_execution(get("x-test", "none")).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(
        e.message().contains("switched off by the circuit breaker"),
        "{}",
        e.message()
    );
    assert!(
        started.elapsed() < Duration::from_millis(150),
        "not called: no 200ms deadline"
    );
    assert_eq!(
        calls("mw-a"),
        before,
        "an open circuit makes no plugin call"
    );
    env.stop().await;
}

/// The namespace a request names: none on a dev cluster (the manifest's,
/// else `default`, is what is tested there); the test's own on the shared
/// control plane, where its controller watches that alone.
fn explicit_namespace(env: &Env) -> String {
    match env.cluster {
        Some(_) => String::new(),
        None => env.ns.clone(),
    }
}

/// CreateExecution takes a whole manifest, as `kubectl create -f` does
/// (here examples/hello.yaml as it is on disk): namespace and generateName
/// come from it, and it runs to its outputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_workflow_manifest_creates_an_execution() {
    let env = Env::start().await;
    let mut admin = Admin::start(&env, loopback()).await;
    let manifest = std::fs::read_to_string(common::root().join("examples/hello.yaml")).unwrap();
    let req = pb::CreateExecutionRequest {
        spec: manifest,
        namespace: explicit_namespace(&env),
        ..Default::default()
    };
    let created = admin
        .client
        .create_execution(req)
        .await
        .unwrap()
        .into_inner();
    let id = created.id.clone().unwrap();
    assert_eq!(id.namespace, env.ns);
    assert!(id.name.starts_with("hello-"), "{id:?}");
    let done = env.finish(&id.name, 60).await;
    let greet = common::node(&done, "greet");
    assert_eq!(
        greet.outputs.as_ref().unwrap()["greeting"],
        serde_json::json!("hello, world")
    );
    // Declared inputs and workflow outputs, as the API shows them.
    let manifest =
        std::fs::read_to_string(common::root().join("examples/inputs-outputs.yaml")).unwrap();
    let req = pb::CreateExecutionRequest {
        spec: manifest,
        namespace: explicit_namespace(&env),
        ..Default::default()
    };
    let id = admin
        .client
        .create_execution(req)
        .await
        .unwrap()
        .into_inner()
        .id;
    env.finish(&id.as_ref().unwrap().name, 60).await;
    let got = admin
        .client
        .get_execution(pb::GetExecutionRequest { id })
        .await
        .unwrap()
        .into_inner();
    let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    assert_eq!(
        json(&got.inputs),
        serde_json::json!({"table": "events", "times": 3})
    );
    assert_eq!(
        json(&got.outputs),
        serde_json::json!({"total": 42, "report": "3 x 14 rows of events"})
    );
    let e = admin
        .client
        .create_execution(create(&env.ns, "x", "apiVersion: v1\nkind: ConfigMap\n"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(
        e.message()
            .contains("expected apiVersion weft.dev/v1alpha1"),
        "{}",
        e.message()
    );
}

/// A Python grpcio client that speaks only reflection v1alpha (as
/// grpcio-reflection does) finds the admin service, builds its request from
/// the reflected descriptors and creates an execution from a whole manifest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1alpha_reflection_client_lists_and_creates() {
    let env = Env::start().await;
    let admin = Admin::start(&env, loopback()).await;
    let script = common::root().join("host/weft/tests/reflection_client.py");
    let manifest = common::root().join("examples/hello.yaml");
    let out = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(admin.addr.to_string())
        .arg(&manifest)
        .arg(explicit_namespace(&env))
        .output()
        .await
        .expect("python3 (make grpc-tools installs grpcio and grpcio-reflection)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("weft.admin.v1.AdminService"), "{stdout}");
    let name = stdout
        .lines()
        .find_map(|l| l.strip_prefix(format!("created: {} ", env.ns).as_str()))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(name.starts_with("hello-"), "{name}");
    let done = env.finish(name, 60).await;
    assert_eq!(
        done.status.unwrap().phase,
        weft_dag::WorkflowPhase::Succeeded
    );
}

/// What the console reads beyond executions: a node in full (edges, kind,
/// plugin, child, Events), its pod's log as a stream, the plugins with
/// their call figures; and the same calls as gRPC-Web over HTTP/1.1, as a
/// browser makes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_details_logs_and_plugins_for_the_console() {
    let env = Env::start().await;
    let mut admin = Admin::start(&env, loopback()).await;
    let c = &mut admin.client;
    let spec = r#"{"nodes": [
        {"id": "first", "task": {"type": "pod", "config": {"image": "busybox", "command": ["sh", "-c", "echo one; echo two; exit 4"]}}},
        {"id": "second", "dependsOn": ["first"], "gate": {"approval": {}}}]}"#;
    c.create_execution(create(&env.ns, "inspect", spec))
        .await
        .unwrap();
    let wf = env.finish("inspect", 60).await;
    assert_eq!(wf.status.unwrap().phase, weft_dag::WorkflowPhase::Failed);
    let node = |n: &str| pb::GetNodeRequest {
        id: id(&env.ns, "inspect"),
        node_id: n.into(),
    };
    let d = c.get_node(node("first")).await.unwrap().into_inner();
    let n = d.node.unwrap();
    assert_eq!(
        (n.phase.as_str(), n.kind.as_str(), n.task_type.as_str()),
        ("Failed", "task", "pod")
    );
    assert!(n.message.contains('4'), "{}", n.message);
    assert!(n.plugin_digest.starts_with("sha256:"), "{n:?}");
    assert!(
        !n.started_at.is_empty() && !n.finished_at.is_empty(),
        "{n:?}"
    );
    let child = n.resource.unwrap();
    assert_eq!(child.kind, "Pod");
    let pod: Value = serde_json::from_str(&d.resource).unwrap();
    assert_eq!(pod["metadata"]["name"], child.name.as_str());
    assert!(
        d.events
            .iter()
            .any(|e| e.object == format!("Pod/{}", child.name)),
        "the pod's Events: {:?}",
        d.events
    );
    let spec: Value = serde_json::from_str(&d.spec).unwrap();
    assert_eq!(spec["task"]["type"], "pod");
    let gate = c.get_node(node("second")).await.unwrap().into_inner();
    let gate = gate.node.unwrap();
    assert_eq!(
        (gate.kind.as_str(), gate.depends_on.clone()),
        ("gate", vec!["first".to_string()])
    );
    let e = c.get_node(node("third")).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");

    let mut logs = c
        .stream_node_logs(pb::StreamNodeLogsRequest {
            id: id(&env.ns, "inspect"),
            node_id: "first".into(),
            follow: false,
            tail_lines: 1,
        })
        .await
        .unwrap()
        .into_inner();
    let mut text = String::new();
    while let Some(chunk) = logs.next().await {
        text.push_str(&chunk.unwrap().text);
    }
    assert_eq!(text, "two\n", "the tail of one line");
    let e = c
        .stream_node_logs(pb::StreamNodeLogsRequest {
            id: id(&env.ns, "inspect"),
            node_id: "second".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");

    let plugins = c
        .list_plugins(pb::ListPluginsRequest {})
        .await
        .unwrap()
        .into_inner()
        .plugins;
    let pod = plugins
        .iter()
        .find(|p| p.task_types.iter().any(|t| t == "pod"))
        .expect("the pod plugin is listed");
    assert_eq!(
        (pod.kind.as_str(), pod.pinning.as_str()),
        ("task", "pinned")
    );
    assert!(pod.digest.starts_with("sha256:"), "{pod:?}");
    assert!(pod.calls > 0 && pod.mean_call_ms > 0.0, "{pod:?}");

    // gRPC-Web, as the console's browser client sends it: HTTP/1.1, a
    // 5-byte frame header before the (empty) message, trailers in the body.
    let mut stream = tokio::net::TcpStream::connect(admin.addr).await.unwrap();
    let req = format!(
        "POST /weft.admin.v1.AdminService/ListPlugins HTTP/1.1\r\nhost: {}\r\ncontent-type: application/grpc-web+proto\r\nx-grpc-web: 1\r\ncontent-length: 5\r\nconnection: close\r\n\r\n",
        admin.addr
    );
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    stream.write_all(req.as_bytes()).await.unwrap();
    stream.write_all(&[0, 0, 0, 0, 0]).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("application/grpc-web+proto"), "{answer}");
    assert!(
        answer.contains("grpc-status:0") && answer.contains("pinned"),
        "{answer}"
    );
    env.stop().await;
}
