//! A web-API plugin's outbound HTTP, end to end: the `fetch` test guest
//! (built from plugins/testing/fetch) asks for what its task lists, real
//! HTTP servers on loopback answer, and the host's egress decides. The
//! guest swallows every error, so what fails here is the host's view.

mod common;

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use weft_plugin::{
    CallError, Plugin, TaskContext, WebApiPlugin, outbound::Tape, registry::load_file,
};

/// A loopback HTTP/1.1 server: `/echo` answers the request's header
/// lines, `/big` 100 KiB with a Content-Length, `/big-chunked` the same
/// chunked, `/slow/<ms>` "ok" after a wait, `/hang` never answers.
struct Server {
    port: u16,
    /// Connections accepted.
    connections: Arc<AtomicUsize>,
    /// Most requests in progress at once.
    max_concurrent: Arc<AtomicUsize>,
    /// Every request head seen.
    seen: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(addr: &str) -> Server {
        let listener = TcpListener::bind(addr).unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let max_concurrent = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Server {
            port,
            connections: connections.clone(),
            max_concurrent: max_concurrent.clone(),
            seen: seen.clone(),
        };
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                connections.fetch_add(1, Ordering::SeqCst);
                let (now, max, seen) = (now.clone(), max_concurrent.clone(), seen.clone());
                std::thread::spawn(move || {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(n, Ordering::SeqCst);
                    serve(stream, &seen);
                    now.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        s
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

fn serve(stream: TcpStream, seen: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    seen.lock().unwrap().push(head.clone());
    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
    let mut out = stream;
    let reply = |out: &mut TcpStream, body: &[u8]| {
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = out.write_all(body);
    };
    if path == "/echo" {
        reply(&mut out, head.as_bytes());
    } else if path == "/big" {
        reply(&mut out, &vec![b'x'; 100 << 10]);
    } else if path == "/big-chunked" {
        let _ = write!(
            out,
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        );
        for _ in 0..100 {
            let _ = write!(out, "400\r\n{}\r\n", "y".repeat(1024));
        }
        let _ = write!(out, "0\r\n\r\n");
    } else if let Some(ms) = path.strip_prefix("/slow/") {
        std::thread::sleep(Duration::from_millis(ms.parse().unwrap_or(0)));
        reply(&mut out, b"ok");
    } else if path == "/hang" {
        std::thread::sleep(Duration::from_secs(30));
    } else {
        reply(&mut out, b"hello");
    }
}

fn fetch() -> WebApiPlugin {
    let engine = common::engine();
    match load_file(&engine, &common::component("test-guests", "fetch")) {
        Ok((Plugin::WebApi(p), _)) => WebApiPlugin::clone(&p),
        Ok((other, _)) => panic!("fetch is not a web-API plugin: {other:?}"),
        Err(e) => panic!("fetch failed to load: {e}"),
    }
}

fn task(requests: Value, spin_ms: u64) -> TaskContext {
    common::ctx(
        "fetch",
        json!({"requests": requests, "spinMs": spin_ms}),
        json!({}),
    )
}

fn get(url: &str) -> Value {
    json!({"method": "GET", "url": url})
}

fn egress_error(e: CallError) -> (String, String, bool) {
    match e {
        CallError::Egress {
            label,
            message,
            retryable,
            ..
        } => (label.to_string(), message, retryable),
        other => panic!("not an egress error: {other}"),
    }
}

#[test]
fn allowed_requests_go_and_others_are_denied_before_any_connection() {
    let ok = Server::start("127.0.0.1:0");
    let trap = Server::start("127.0.0.2:0");
    let mut plugin = fetch();
    let (meta, _) = plugin
        .create(&task(json!([get(&ok.url("/"))]), 0), "k")
        .unwrap();
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["got"][0]["body"], "hello", "{meta}");
    assert_eq!(meta["key"], "k");

    // Not in the manifest (127.0.0.2); a method it does not allow.
    let denied = format!("http://127.0.0.2:{}/x", trap.port);
    let e = plugin
        .create(&task(json!([get(&denied)]), 0), "k")
        .unwrap_err();
    let (label, msg, retryable) = egress_error(e);
    assert_eq!(label, "egress_denied");
    assert!(!retryable);
    assert_eq!(
        msg,
        format!("plugin fetch may not GET {denied}: not in its manifest's egress.allow")
    );
    let put = json!([{"method": "PUT", "url": ok.url("/")}]);
    let (_, msg, _) = egress_error(plugin.create(&task(put, 0), "k").unwrap_err());
    assert!(msg.contains("may not PUT"), "{msg}");

    // The operator narrows to another port: the same URL is now refused.
    plugin.set_config(
        serde_json::from_value(json!({"egress": {"allow": [
            {"host": "127.0.0.1", "ports": [1], "schemes": ["http"]}
        ]}}))
        .unwrap(),
    );
    let (_, msg, _) = egress_error(
        plugin
            .create(&task(json!([get(&ok.url("/"))]), 0), "k")
            .unwrap_err(),
    );
    assert!(
        msg.ends_with("not in the operator's egress.allow for this plugin"),
        "{msg}"
    );
    assert_eq!(
        trap.connections.load(Ordering::SeqCst),
        0,
        "a packet left for a denied address"
    );
    assert_eq!(
        ok.connections.load(Ordering::SeqCst),
        1,
        "only the allowed request connected"
    );
}

#[test]
fn credentials_are_added_by_the_host_and_never_come_back() {
    let server = Server::start("127.0.0.1:0");
    let mut plugin = fetch();
    plugin.set_config(
        serde_json::from_value(json!({"credentials": [
            {"header": "X-Api-Token", "prefix": "Token ", "value": "s3cr3t-value-42"}
        ]}))
        .unwrap(),
    );
    let (meta, _) = plugin
        .create(&task(json!([get(&server.url("/echo"))]), 0), "k")
        .unwrap();
    // The server got it; the guest's answer echoes it, cut out by the host.
    let seen = server.seen.lock().unwrap().join("");
    assert!(
        seen.to_ascii_lowercase()
            .contains("x-api-token: token s3cr3t-value-42"),
        "{seen}"
    );
    assert!(!meta.contains("s3cr3t-value-42"), "{meta}");
    assert!(meta.contains("[redacted]"), "{meta}");
    let cfg = task(json!([get(&server.url("/"))]), 0);
    // A malformed entry fails every call, naming the field.
    plugin.set_config(
        serde_json::from_value(json!({"credentials": [{"header": "a b", "value": "v"}]})).unwrap(),
    );
    let e = plugin.create(&cfg, "k").unwrap_err().to_string();
    assert!(e.contains("credentials[0].header"), "{e}");
}

#[test]
fn a_tasks_own_credentials_go_with_its_calls_only_and_never_come_back() {
    let server = Server::start("127.0.0.1:0");
    let mut plugin = fetch();
    let hosts = ["127.0.0.1".to_string()];
    let cred = plugin
        .task_credential(
            "task.secrets[0]",
            "Authorization",
            "Bearer ",
            &hosts,
            "t0ken-of-the-task",
        )
        .unwrap();
    let cfg = task(json!([get(&server.url("/echo"))]), 0);
    let (meta, _) = plugin.create_with(&cfg, "k", &[cred]).unwrap();
    let seen = server.seen.lock().unwrap().join("");
    assert!(
        seen.to_ascii_lowercase()
            .contains("authorization: bearer t0ken-of-the-task"),
        "{seen}"
    );
    // The echo names the value; the host cuts out the whole value and the
    // token alone.
    assert!(!meta.contains("t0ken-of-the-task"), "{meta}");
    assert!(meta.contains("[redacted]"), "{meta}");
    // Another task's call (the same spare instances) sends nothing.
    server.seen.lock().unwrap().clear();
    plugin.create(&cfg, "k").unwrap();
    let seen = server.seen.lock().unwrap().join("").to_ascii_lowercase();
    assert!(!seen.contains("authorization"), "{seen}");
    // A credential for other hosts is not sent here.
    server.seen.lock().unwrap().clear();
    let other = ["api.example.com".to_string()];
    let cred = plugin
        .task_credential("task.secrets[0]", "X-Key", "", &other, "elsewhere-key")
        .unwrap();
    plugin.create_with(&cfg, "k", &[cred]).unwrap();
    let seen = server.seen.lock().unwrap().join("").to_ascii_lowercase();
    assert!(!seen.contains("x-key"), "{seen}");
    // Bad parts are named by where the task gave them.
    let e = plugin
        .task_credential("task.secrets[1]", "a b", "", &hosts, "v")
        .unwrap_err();
    assert!(
        e.starts_with("task.secrets[1].header.name: \"a b\" is not a header name"),
        "{e}"
    );
    let e = plugin
        .task_credential("task.secrets[1]", "X-Key", "", &hosts, "line\nbreak")
        .unwrap_err();
    assert_eq!(
        e,
        "task.secrets[1] (the Secret's value): not a valid header value"
    );
    // When the operator lets the plugin reach any host, a task credential
    // must name its hosts: else a workflow could send it to its own server.
    plugin
        .set_config(serde_json::from_value(json!({"egress": {"allow": [{"host": "*"}]}})).unwrap());
    let e = plugin
        .task_credential("task.secrets[0]", "X-Key", "", &[], "v4lue")
        .unwrap_err();
    assert!(
        e.starts_with(
            "task.secrets[0].header.hosts: required, since the egress in force allows any host"
        ),
        "{e}"
    );
    assert!(
        plugin
            .task_credential("task.secrets[0]", "X-Key", "", &hosts, "v4lue")
            .is_ok()
    );
}

#[test]
fn responses_over_the_cap_are_refused_with_or_without_a_length() {
    let server = Server::start("127.0.0.1:0");
    let plugin = fetch();
    for path in ["/big", "/big-chunked"] {
        let url = server.url(path);
        let (label, msg, _) = egress_error(
            plugin
                .create(&task(json!([get(&url)]), 0), "k")
                .unwrap_err(),
        );
        assert_eq!(label, "response_too_large");
        assert!(msg.contains(&url) && msg.contains("65536 bytes"), "{msg}");
    }
}

#[test]
fn time_on_the_network_is_bounded_apart_from_the_guests_deadline() {
    let server = Server::start("127.0.0.1:0");
    let plugin = fetch();
    // 1.5 s waiting on a server: over the 1 s deadline, but that counts
    // only the guest's own time.
    let (meta, _) = plugin
        .create(&task(json!([get(&server.url("/slow/1500"))]), 0), "k")
        .unwrap();
    assert!(meta.contains("\"ok\""), "{meta}");
    // 1.5 s of the guest's own work is not.
    let e = plugin.create(&task(json!([]), 1500), "k").unwrap_err();
    assert!(matches!(e, CallError::Deadline { .. }), "{e}");
    // A server that never answers: the request's own 3 s timeout.
    let start = Instant::now();
    let url = server.url("/hang");
    let (label, msg, retryable) = egress_error(
        plugin
            .create(&task(json!([get(&url)]), 0), "k")
            .unwrap_err(),
    );
    assert_eq!(label, "egress_timeout");
    assert!(retryable && msg.contains(&url), "{msg}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn requests_of_one_plugin_wait_for_its_concurrency_limit() {
    let server = Server::start("127.0.0.1:0");
    let plugin = Arc::new(fetch());
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let (p, url) = (plugin.clone(), server.url("/slow/300"));
            std::thread::spawn(move || p.create(&task(json!([get(&url)]), 0), "k").map(|_| ()))
        })
        .collect();
    for c in calls {
        c.join().unwrap().unwrap();
    }
    assert_eq!(server.connections.load(Ordering::SeqCst), 3);
    assert_eq!(
        server.max_concurrent.load(Ordering::SeqCst),
        1,
        "egress.concurrency is 1"
    );
}

#[test]
fn a_recording_replays_without_the_network() {
    let server = Server::start("127.0.0.1:0");
    let mut live = fetch();
    let tape = Tape::record();
    live.set_tape(tape.clone());
    let post = json!({"method": "POST", "url": server.url("/echo"), "body": "{\"a\":1}"});
    let cfg = task(json!([get(&server.url("/")), post]), 0);
    let (recorded_meta, _) = live.create(&cfg, "k").unwrap();
    let exchanges = tape.recorded();
    assert_eq!(exchanges.len(), 2);
    assert_eq!(exchanges[1].request.body.as_deref(), Some("{\"a\":1}"));
    let before = server.connections.load(Ordering::SeqCst);

    let mut replay = fetch();
    let tape = Tape::replay(exchanges);
    replay.set_tape(tape.clone());
    let (meta, _) = replay.create(&cfg, "k").unwrap();
    assert_eq!(meta, recorded_meta);
    assert!(tape.unused().is_empty());
    assert_eq!(
        server.connections.load(Ordering::SeqCst),
        before,
        "the replay went live"
    );
    // Asked again, the tape has nothing left for it: an error naming the request.
    let e = replay.create(&cfg, "k").unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "no recorded exchange left for GET {}",
            server.url("/")
        )),
        "{e}"
    );
}
