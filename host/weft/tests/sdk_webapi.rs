//! The web-API examples of the Python and JavaScript SDKs
//! (sdk/python/examples/http-job, sdk/js/examples/http-job), built from
//! source with each SDK's build.sh and run through the host's own
//! create / get / delete against a real HTTP server on loopback: create
//! sends the request the example documents (body included), get maps the
//! server's answers to phases and outputs, delete reaches the server,
//! service errors become plugin errors, a refused connection is a
//! retryable plugin error, a response over the manifest's size cap fails
//! with the host's error, and a URL outside the manifest's egress
//! allow-list fails the call with the host's egress error naming the URL
//! while the server there sees no connection.
//!
//! The warm-up guests (sdk/python/tests/webapi-warm,
//! sdk/js/tests/webapi-warm) show that the build-time warm-up called the
//! plugin with its requests answered by the SDK, never the network.
//!
//! Each example is built once per run of this file, and not at all when
//! its sources and SDK are those of the last build (a stamp beside the
//! component in target/sdk-webapi); compiled components are cached in
//! target/weft-test-cache.

use std::{
    collections::BTreeMap,
    io::ErrorKind,
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex, OnceLock},
};

use loopback::Seen;
use serde_json::{Value, json};
use weft_plugin::{
    CallError, EngineConfig, Phase, Plugin, PluginEngine, TaskContext, WebApiPlugin, registry,
};

#[path = "common/loopback.rs"]
mod loopback;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One SDK's example: the SDK folder under sdk/, the example, the
/// manifest's name.
struct Example {
    sdk: &'static str,
    dir: &'static str,
    name: &'static str,
}

const PYTHON: Example = Example {
    sdk: "python",
    dir: "sdk/python/examples/http-job",
    name: "py-http-job",
};

const JAVASCRIPT: Example = Example {
    sdk: "js",
    dir: "sdk/js/examples/http-job",
    name: "js-http-job",
};

/// The warm-up guests (sdk/*/tests/webapi-warm).
const PYTHON_WARM: Example = Example {
    sdk: "python",
    dir: "sdk/python/tests/webapi-warm",
    name: "py-webapi-warm",
};

const JAVASCRIPT_WARM: Example = Example {
    sdk: "js",
    dir: "sdk/js/tests/webapi-warm",
    name: "js-webapi-warm",
};

/// A digest of what the build reads: the SDK (the example is inside it),
/// the WIT and the reproducible-build shim; installed and built files left out.
fn stamp(ex: &Example) -> String {
    let script = format!(
        "find sdk/{} wit/plugin-0.2 sdk/repro.sh sdk/repro-shim.c -type f \
         -not -path '*/node_modules/*' -not -path '*/out/*' -not -path '*/__pycache__/*' \
         -not -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum",
        ex.sdk
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(root())
        .output()
        .expect("bash");
    assert!(out.status.success(), "stamp of {}", ex.dir);
    String::from_utf8_lossy(&out.stdout)[..64].to_string()
}

/// The example's component (built by its SDK's build.sh when out of date).
fn build(ex: &Example) -> PathBuf {
    let out = root().join("target/sdk-webapi");
    let wasm = out.join(format!("{}.wasm", ex.name));
    let stamp_file = out.join(format!("{}.stamp", ex.name));
    let want = stamp(ex);
    if wasm.exists() && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(&want) {
        return wasm;
    }
    let setup = Command::new("bash")
        .arg(format!("sdk/{}/setup.sh", ex.sdk))
        .current_dir(root())
        .output()
        .expect("setup.sh");
    assert!(
        setup.status.success(),
        "sdk/{}/setup.sh: {}",
        ex.sdk,
        String::from_utf8_lossy(&setup.stderr)
    );
    let built = Command::new("bash")
        .arg(format!("sdk/{}/build.sh", ex.sdk))
        .arg(ex.dir)
        .arg(&out)
        .current_dir(root())
        .output()
        .expect("build.sh");
    assert!(
        built.status.success(),
        "sdk/{}/build.sh {}: {}{}",
        ex.sdk,
        ex.dir,
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    std::fs::write(&stamp_file, want).unwrap();
    wasm
}

fn engine() -> &'static PluginEngine {
    static ENGINE: OnceLock<PluginEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        PluginEngine::new(EngineConfig {
            cache_dir: Some(root().join("target/weft-test-cache")),
            ..EngineConfig::default()
        })
        .unwrap()
    })
}

/// The example, built and loaded as the registry loads a plugin file;
/// once per run (the tests of one example share it).
fn load(ex: &Example) -> Arc<WebApiPlugin> {
    static LOADED: Mutex<BTreeMap<&str, Arc<WebApiPlugin>>> = Mutex::new(BTreeMap::new());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = loaded.get(ex.name) {
        return p.clone();
    }
    let wasm = build(ex);
    let plugin = match registry::load_file(engine(), &wasm) {
        Ok((Plugin::WebApi(p), _)) => p,
        Ok(_) => panic!("{} is not a web-API plugin", ex.name),
        Err(e) => panic!("{}: {e}", ex.name),
    };
    loaded.insert(ex.name, plugin.clone());
    plugin
}

/// A jobs API on loopback, as the examples expect it: `POST /jobs` makes
/// the job named by the body's `id` (or answers `create`, when the test
/// set it), `GET /jobs/<id>` answers `job` (which the test sets),
/// `DELETE /jobs/<id>` answers 204.
struct Server {
    http: loopback::Server,
    url: String,
    job: Arc<Mutex<Value>>,
    create: Arc<Mutex<Option<(u16, Value)>>>,
}

impl Server {
    fn start() -> Server {
        let job = Arc::new(Mutex::new(json!({"state": "PENDING"})));
        let create = Arc::new(Mutex::new(None));
        let (j, c) = (job.clone(), create.clone());
        let http = loopback::Server::start(move |req| jobs(req, &j, &c));
        Server {
            url: http.url(""),
            http,
            job,
            create,
        }
    }

    fn answer_create(&self, status: u16, body: Value) {
        *self.create.lock().unwrap() = Some((status, body));
    }

    fn set_job(&self, job: Value) {
        *self.job.lock().unwrap() = job;
    }

    fn seen(&self) -> Vec<Seen> {
        self.http.all()
    }
}

fn jobs(req: &Seen, job: &Mutex<Value>, create: &Mutex<Option<(u16, Value)>>) -> (u16, Value) {
    match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/jobs") if create.lock().unwrap().is_some() => {
            create.lock().unwrap().clone().unwrap()
        }
        ("POST", "/jobs") => {
            let id = req.json()["id"].as_str().unwrap_or_default().to_string();
            (201, json!({"id": id, "state": "PENDING"}))
        }
        // `"big"`: a job of 2 MiB, over the examples' egress.maxResponse (1Mi).
        ("GET", p) if p.starts_with("/jobs/") => match job.lock().unwrap().clone() {
            Value::String(s) if s == "big" => (200, json!({"state": "x".repeat(2 << 20)})),
            j => (200, j),
        },
        ("DELETE", p) if p.starts_with("/jobs/") => (204, Value::Null),
        _ => (404, json!({"error": "no such route"})),
    }
}

/// A task of the examples' type against `url`.
fn task(url: &str) -> TaskContext {
    TaskContext::for_attempt(
        "web",
        "00000000-0000-0000-0000-000000000000",
        "default",
        "train",
        0,
        "http-job",
        json!({"url": url, "command": "train", "params": {"lr": 0.1}}),
        json!({"epochs": 3}),
    )
}

/// create → get (pending, running, succeeded, failed) → delete against the server.
fn creates_polls_and_deletes(ex: &Example) {
    let plugin = load(ex);
    let server = Server::start();
    let ctx = task(&server.url);
    let key = ctx.resource_name.clone();

    let (meta, _) = plugin
        .create(&ctx, &key)
        .unwrap_or_else(|e| panic!("{}: create: {e}", ex.name));
    let seen = server.seen();
    assert_eq!(seen.len(), 1, "{}: {seen:#?}", ex.name);
    let post = &seen[0];
    assert_eq!(
        (post.method.as_str(), post.path.as_str()),
        ("POST", "/jobs")
    );
    assert_eq!(
        post.json(),
        json!({"id": key, "command": "train", "params": {"lr": 0.1}, "inputs": {"epochs": 3}}),
        "{}",
        ex.name
    );
    // A length, not a chunked body: many servers do not read chunked requests.
    assert_eq!(
        post.headers.get("content-length"),
        Some(&post.body.len().to_string()),
        "{}: {:?}",
        ex.name,
        post.headers
    );
    assert_eq!(
        post.headers.get("idempotency-key"),
        Some(&key),
        "{}",
        ex.name
    );
    assert!(
        post.headers
            .get("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{}: {:?}",
        ex.name,
        post.headers
    );

    let phase = |job: Value| {
        server.set_job(job);
        plugin
            .get(&ctx, &meta)
            .unwrap_or_else(|e| panic!("{}: get: {e}", ex.name))
            .0
    };
    assert_eq!(
        phase(json!({"id": key, "state": "PENDING"})).phase,
        Phase::Queued
    );
    let running = phase(json!({"id": key, "state": "RUNNING", "message": "epoch 1"}));
    assert_eq!(running.phase, Phase::Running, "{}", ex.name);
    assert_eq!(running.message.as_deref(), Some("epoch 1"));
    let job_url = format!("{}/jobs/{key}", server.url);
    assert_eq!(running.log_links[0].uri, job_url, "{}", ex.name);
    let done = phase(json!({"id": key, "state": "SUCCEEDED", "result": {"accuracy": 0.93}}));
    assert_eq!(done.phase, Phase::Success, "{}", ex.name);
    assert_eq!(
        Value::Object(done.outputs.unwrap()),
        json!({"accuracy": 0.93})
    );
    let failed = phase(json!({"id": key, "state": "FAILED", "message": "out of memory"}));
    assert_eq!(failed.phase, Phase::RetryableFailure, "{}", ex.name);
    assert_eq!(failed.message.as_deref(), Some("out of memory"));
    let gets = server.seen();
    assert!(
        gets[1..]
            .iter()
            .all(|s| s.method == "GET" && s.path == format!("/jobs/{key}")),
        "{}: {gets:#?}",
        ex.name
    );

    plugin
        .delete(&ctx, &meta)
        .unwrap_or_else(|e| panic!("{}: delete: {e}", ex.name));
    let last = server.seen().pop().unwrap();
    assert_eq!(
        (last.method.as_str(), last.path.clone()),
        ("DELETE", format!("/jobs/{key}")),
        "{}",
        ex.name
    );
}

/// A response over the manifest's `egress.maxResponse` fails get with the
/// host's error naming the URL (the SDK's read of the body ends without
/// a trap or a hang).
fn a_response_over_the_cap_is_refused(ex: &Example) {
    let plugin = load(ex);
    let server = Server::start();
    let ctx = task(&server.url);
    let (meta, _) = plugin.create(&ctx, &ctx.resource_name).unwrap();
    server.set_job(json!("big"));
    match plugin.get(&ctx, &meta) {
        Err(CallError::Egress { label, message, .. }) => {
            assert_eq!(label, "response_too_large", "{}: {message}", ex.name);
            assert!(message.contains(&meta), "{}: {message}", ex.name);
        }
        other => panic!("{}: want the host's size error, got {other:?}", ex.name),
    }
}

/// The service's answers to create, as the examples read them: 409 (the
/// job exists: a create repeated after a crash) adopts it, a 4xx is a
/// permanent error, a 5xx a retryable one, each naming the URL and status.
fn service_errors_become_plugin_errors(ex: &Example) {
    let plugin = load(ex);
    let server = Server::start();
    let ctx = task(&server.url);
    let key = ctx.resource_name.clone();

    server.answer_create(409, json!({"error": "exists"}));
    let (meta, _) = plugin
        .create(&ctx, &key)
        .unwrap_or_else(|e| panic!("{}: create after 409: {e}", ex.name));
    assert_eq!(meta, format!("{}/jobs/{key}", server.url), "{}", ex.name);

    for (status, retryable) in [(400, false), (503, true)] {
        server.answer_create(status, json!({"error": "no"}));
        match plugin.create(&ctx, &key) {
            Err(CallError::Plugin {
                message,
                retryable: r,
                ..
            }) => {
                assert_eq!(r, retryable, "{}: {status}: {message}", ex.name);
                assert!(
                    message.contains(&format!("{}/jobs answered {status}", server.url)),
                    "{}: {message}",
                    ex.name
                );
            }
            other => panic!("{}: {status}: want a plugin error, got {other:?}", ex.name),
        }
    }
}

/// A URL outside the manifest's allow-list (127.0.0.2) fails the call with
/// the host's egress error naming it, and nothing connects there.
fn a_url_outside_the_allow_list_is_denied(ex: &Example) {
    let plugin = load(ex);
    let other = TcpListener::bind("127.0.0.2:0").expect("127.0.0.2 on loopback");
    other.set_nonblocking(true).unwrap();
    let url = format!("http://{}", other.local_addr().unwrap());
    let ctx = task(&url);
    match plugin.create(&ctx, &ctx.resource_name) {
        Err(CallError::Egress {
            label,
            message,
            retryable,
            ..
        }) => {
            assert_eq!(label, "egress_denied", "{}", ex.name);
            assert!(
                message.contains(&format!("{url}/jobs")),
                "{}: {message}",
                ex.name
            );
            assert!(!retryable, "{}", ex.name);
        }
        other => panic!("{}: want an egress denial, got {other:?}", ex.name),
    }
    match other.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        got => panic!("{}: the denied server saw a connection: {got:?}", ex.name),
    }
}

/// Nothing listens: a transport failure, which the SDK makes a retryable
/// plugin error.
fn a_refused_connection_is_a_retryable_plugin_error(ex: &Example) {
    let plugin = load(ex);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ctx = task(&format!("http://127.0.0.1:{port}"));
    match plugin.create(&ctx, &ctx.resource_name) {
        Err(CallError::Plugin {
            retryable, message, ..
        }) => assert!(retryable, "{}: {message}", ex.name),
        other => panic!("{}: want a retryable plugin error, got {other:?}", ex.name),
    }
}

/// The build-time warm-up called create four times, each of its requests
/// answered by the SDK itself (the build has no network), and the first
/// real call starts from that snapshot.
fn the_warm_up_ran_without_network(ex: &Example) {
    let plugin = load(ex);
    let ctx = task("http://127.0.0.1:9");
    let (meta, _) = plugin
        .create(&ctx, &ctx.resource_name)
        .unwrap_or_else(|e| panic!("{}: create: {e}", ex.name));
    assert_eq!(meta, "creates=5 stood_in=4", "{}", ex.name);
}

#[test]
fn python_warm_up_calls_the_plugin_without_network() {
    the_warm_up_ran_without_network(&PYTHON_WARM);
}

#[test]
fn javascript_warm_up_calls_the_plugin_without_network() {
    the_warm_up_ran_without_network(&JAVASCRIPT_WARM);
}

#[test]
fn python_example_creates_polls_and_deletes() {
    creates_polls_and_deletes(&PYTHON);
}

#[test]
fn python_example_is_denied_outside_its_allow_list() {
    a_url_outside_the_allow_list_is_denied(&PYTHON);
}

#[test]
fn python_example_reports_a_refused_connection_as_retryable() {
    a_refused_connection_is_a_retryable_plugin_error(&PYTHON);
}

#[test]
fn python_example_turns_service_errors_into_plugin_errors() {
    service_errors_become_plugin_errors(&PYTHON);
}

#[test]
fn python_example_is_refused_a_response_over_the_cap() {
    a_response_over_the_cap_is_refused(&PYTHON);
}

#[test]
fn javascript_example_is_refused_a_response_over_the_cap() {
    a_response_over_the_cap_is_refused(&JAVASCRIPT);
}

#[test]
fn javascript_example_creates_polls_and_deletes() {
    creates_polls_and_deletes(&JAVASCRIPT);
}

#[test]
fn javascript_example_is_denied_outside_its_allow_list() {
    a_url_outside_the_allow_list_is_denied(&JAVASCRIPT);
}

#[test]
fn javascript_example_reports_a_refused_connection_as_retryable() {
    a_refused_connection_is_a_retryable_plugin_error(&JAVASCRIPT);
}

#[test]
fn javascript_example_turns_service_errors_into_plugin_errors() {
    service_errors_become_plugin_errors(&JAVASCRIPT);
}
