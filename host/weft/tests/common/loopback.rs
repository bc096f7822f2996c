//! A loopback HTTP/1.1 server for web-API task tests: answers JSON from a
//! handler and keeps every request it received (method, path, headers,
//! body), so a test checks what reached it and how often.

// Each test file uses a part of it.
#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    sync::{Arc, Mutex},
    thread,
    time::Duration,
};

use serde_json::Value;

/// Answers a request: status and JSON body (`null`: no body).
pub type Handler = Arc<dyn Fn(&Seen) -> (u16, Value) + Send + Sync>;

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Seen {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Its `Idempotency-Key`.
    pub fn key(&self) -> &str {
        self.headers
            .get("idempotency-key")
            .map(String::as_str)
            .unwrap_or_default()
    }
}

/// A loopback HTTP/1.1 server answering JSON, keeping every request.
pub struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    /// Listening on 127.0.0.1 (a free port), answering with `handler`.
    pub fn start(handler: impl Fn(&Seen) -> (u16, Value) + Send + Sync + 'static) -> Server {
        let handler: Handler = Arc::new(handler);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (s, handler) = (s.clone(), handler.clone());
                thread::spawn(move || serve(stream, &s, &*handler));
            }
        });
        Server { port, seen }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The requests to `method path` so far.
    pub fn seen(&self, method: &str, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .cloned()
            .collect()
    }

    /// Every request so far, in order.
    pub fn all(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many requests reached it.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

/// Answers one connection with `handler`'s answer to its request.
fn serve(
    stream: TcpStream,
    seen: &Mutex<Vec<Seen>>,
    handler: &(dyn Fn(&Seen) -> (u16, Value) + Send + Sync),
) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    let Some(req) = read_request(&mut r) else {
        return;
    };
    let (status, body) = handler(&req);
    seen.lock().unwrap().push(req);
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let reason = match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        409 => "Conflict",
        503 => "Service Unavailable",
        _ => "Not Found",
    };
    let _ = write!(
        writer,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// One HTTP/1.1 request, its body read by content-length or chunked.
fn read_request(r: &mut impl BufRead) -> Option<Seen> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let mut body = Vec::new();
    if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = headers.get("content-length") {
        body = vec![0; n.parse().ok()?];
        r.read_exact(&mut body).ok()?;
    }
    Some(Seen {
        method,
        path,
        headers,
        body,
    })
}
