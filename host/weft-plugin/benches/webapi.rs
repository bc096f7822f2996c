//! What the host adds to one `get` poll of a web-API plugin, excluding the
//! remote call (issue 18/20's goal: at most 100 µs at p50). The `ray-job`
//! plugin asks where a RUNNING Ray job stands, answered with the body a
//! real Ray 2.60.0 head gave (tests/fixtures/ray/01-succeeded.json):
//!
//! - `replay`: from a recording (`weft plugin test --replay`'s tape), so
//!   no network at all: the instance, the guest's request and JSON
//!   parsing, the host's egress check and hooks, the phase mapping.
//! - `live`: the same over loopback to a real HTTP server answering that
//!   body, next to `native`, the same request made with a plain socket in
//!   this process: `live - native` is the host's share of a live poll.
//!
//! `cargo bench -p weft-plugin --bench webapi` (after `make guests`); the
//! figures go to docs/benchmarks.md.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_plugin::outbound::{Exchange, RecordedRequest, RecordedResponse, Tape};
use weft_plugin::{
    EngineConfig, Plugin, PluginEngine, TaskContext, WebApiPlugin, registry::load_file,
};

const CALLS: usize = 2000;

fn running_body() -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/ray/01-succeeded.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let answer = fixture["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["request"]["method"] == "GET" && e["response"]["body"]["status"] == "RUNNING")
        .expect("a RUNNING answer in the fixture");
    answer["response"]["body"].to_string()
}

/// A loopback server answering every request with `body` (one request per connection).
fn server(body: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let mut out = stream;
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// The same GET with a plain socket: the remote call alone.
fn native_get(port: u16, path: &str) -> usize {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    buf.len()
}

fn plugin(engine: &PluginEngine) -> WebApiPlugin {
    load(engine, "plugins/ray-job.wasm")
}

fn load(engine: &PluginEngine, file: &str) -> WebApiPlugin {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target")
        .join(file);
    assert!(
        path.is_file(),
        "{} missing: run `make guests`",
        path.display()
    );
    match load_file(engine, &path) {
        Ok((Plugin::WebApi(p), _)) => WebApiPlugin::clone(&p),
        other => panic!("{file}: {other:?}"),
    }
}

fn ctx() -> TaskContext {
    TaskContext::for_attempt(
        "nightly",
        "3f1c9a4e-1111-2222-3333-444455556666",
        "team-a",
        "train",
        0,
        "ray-job",
        json!({"entrypoint": "python train.py"}),
        json!({}),
    )
}

/// p50 and p99 of `calls` timings, in µs.
fn percentiles(mut d: Vec<Duration>) -> (f64, f64) {
    d.sort();
    let at = |q: f64| d[((d.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99))
}

/// Times `f` `calls` times after a tenth as many warm-ups, each call once
/// `ready` says the next may start (a spare instance is ready: polls are
/// far apart in the controller; the wait is not timed).
fn time(calls: usize, ready: impl Fn() -> bool, mut f: impl FnMut()) -> (f64, f64) {
    let mut one = || {
        while !ready() {
            std::thread::yield_now();
        }
        let start = Instant::now();
        f();
        start.elapsed()
    };
    for _ in 0..calls / 10 {
        one();
    }
    percentiles((0..calls).map(|_| one()).collect())
}

fn main() {
    // Spares prepared ahead, as the controller runs (one call at a time
    // per poll, far apart).
    let engine = PluginEngine::new(EngineConfig {
        spares: 1,
        ..EngineConfig::default()
    })
    .unwrap();
    let body = running_body();
    let port = server(body.clone());
    let address = format!("http://127.0.0.1:{port}");
    let meta = json!({"address": address, "submissionId": "nightly-train-0"}).to_string();
    let ctx = ctx();
    let path = "/api/jobs/nightly-train-0";

    let mut replay = plugin(&engine);
    let exchange = Exchange {
        request: RecordedRequest {
            method: "GET".into(),
            url: format!("{address}{path}"),
            body: None,
        },
        response: RecordedResponse {
            status: 200,
            headers: [("content-type".to_string(), "application/json".to_string())].into(),
            body: body.clone(),
        },
    };
    replay.set_tape(Tape::replay(vec![exchange; CALLS + CALLS / 10 + 1]));
    let (info, _) = replay.get(&ctx, &meta).expect("replayed get");
    assert_eq!(info.phase.to_string(), "running");
    let replayed = time(
        CALLS,
        || replay.spares_ready() > 0,
        || {
            replay.get(&ctx, &meta).expect("get");
        },
    );
    let live = plugin(&engine);
    let lived = time(
        CALLS,
        || live.spares_ready() > 0,
        || {
            live.get(&ctx, &meta).expect("get");
        },
    );
    let native = time(
        CALLS,
        || true,
        || {
            native_get(port, path);
        },
    );
    // The floor: the fetch test guest's create making no request (an
    // instance and a call of the web-API world, nothing parsed), and the
    // same guest making one replayed GET (the wasi:http plumbing).
    let fetch = load(&engine, "test-guests/fetch.wasm");
    let none = TaskContext {
        config: json!({"requests": []}),
        ..ctx.clone()
    };
    let floor = time(
        CALLS,
        || fetch.spares_ready() > 0,
        || {
            fetch.create(&none, "k").expect("create");
        },
    );
    let mut fetch_one = load(&engine, "test-guests/fetch.wasm");
    let one_url = format!("http://127.0.0.1:{port}/x");
    let exchange = Exchange {
        request: RecordedRequest {
            method: "GET".into(),
            url: one_url.clone(),
            body: None,
        },
        response: RecordedResponse {
            status: 200,
            headers: Default::default(),
            body: "ok".into(),
        },
    };
    fetch_one.set_tape(Tape::replay(vec![exchange; CALLS + CALLS / 10 + 1]));
    let one = TaskContext {
        config: json!({"requests": [{"method": "GET", "url": one_url}]}),
        ..ctx.clone()
    };
    let one_request = time(
        CALLS,
        || fetch_one.spares_ready() > 0,
        || {
            fetch_one.create(&one, "k").expect("create");
        },
    );
    println!("webapi get poll (ray-job, RUNNING answer), {CALLS} calls, p50 / p99 µs:");
    println!(
        "  replay (no network)       {:8.1} / {:8.1}",
        replayed.0, replayed.1
    );
    println!(
        "  live over loopback        {:8.1} / {:8.1}",
        lived.0, lived.1
    );
    println!(
        "  native socket GET (ref)   {:8.1} / {:8.1}",
        native.0, native.1
    );
    println!(
        "  floor: fetch, no request  {:8.1} / {:8.1}",
        floor.0, floor.1
    );
    println!(
        "  fetch, one replayed GET   {:8.1} / {:8.1}",
        one_request.0, one_request.1
    );
    println!(
        "  host share of a live poll {:8.1} (p50 live - p50 native)",
        lived.0 - native.0
    );
}
