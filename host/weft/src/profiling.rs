//! `--profiling-addr`: CPU and heap profiles in pprof's format, as Go
//! controllers serve them (`go tool pprof http://ADDR/debug/pprof/profile`):
//!
//! - `/debug/pprof/profile?seconds=N` samples every thread's stack 99
//!   times a second for N seconds (default 30, at most 300; the `pprof`
//!   crate, SIGPROF) and answers a gzipped `perftools.profiles.Profile`
//!   with the functions symbolized;
//! - `/debug/pprof/heap` is jemalloc's sampled heap profile (one sample
//!   per 512 KiB allocated; `jemalloc_pprof`), of allocations made since
//!   profiling was switched on at start, addresses symbolized by
//!   `pprof` with the binary. It needs the `weft` binary's allocator
//!   (jemalloc); elsewhere it answers 503.
//!
//! Off by default, and on its own listener: a profile exposes the
//! process's internals, so it never shares the public admin port.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// Samples a second: Go's default rate, off the round 100 so the sampler
/// does not beat with periodic work.
const FREQUENCY: i32 = 99;
const MAX_SECONDS: u64 = 300;

/// One CPU profile at a time (the sampler is process-wide).
#[derive(Default)]
struct Profiler(tokio::sync::Mutex<()>);

/// Serves the profiles on `addr`; the address bound.
pub async fn serve(addr: SocketAddr) -> anyhow::Result<SocketAddr> {
    activate_heap().await;
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let profiler = Arc::new(Profiler::default());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let profiler = profiler.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let profiler = profiler.clone();
                    async move { Ok::<_, Infallible>(respond(req, &profiler).await) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(local)
}

async fn respond(req: Request<Incoming>, profiler: &Profiler) -> Response<Full<Bytes>> {
    let result = match req.uri().path() {
        "/debug/pprof/profile" => match seconds(req.uri().query()) {
            Ok(secs) => cpu(profiler, secs).await,
            Err(e) => Err((StatusCode::BAD_REQUEST, e)),
        },
        "/debug/pprof/heap" | "/debug/pprof/allocs" => heap().await,
        _ => Err((
            StatusCode::NOT_FOUND,
            "not found: /debug/pprof/profile?seconds=N or /debug/pprof/heap\n".into(),
        )),
    };
    let (code, ctype, body) = match result {
        Ok(bytes) => (StatusCode::OK, "application/octet-stream", bytes),
        Err((code, msg)) => (code, "text/plain", msg.into_bytes()),
    };
    Response::builder()
        .status(code)
        .header("content-type", ctype)
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

type Answer = Result<Vec<u8>, (StatusCode, String)>;

/// `seconds=N` of the query (30 without it).
fn seconds(query: Option<&str>) -> Result<u64, String> {
    let Some(v) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("seconds="))
    else {
        return Ok(30);
    };
    match v.parse::<u64>() {
        Ok(n) if (1..=MAX_SECONDS).contains(&n) => Ok(n),
        _ => Err(format!(
            "seconds={v}: a whole number of seconds from 1 to {MAX_SECONDS}\n"
        )),
    }
}

/// Samples for `secs` seconds: the gzipped pprof protobuf.
async fn cpu(profiler: &Profiler, secs: u64) -> Answer {
    let busy = |e: String| (StatusCode::INTERNAL_SERVER_ERROR, e);
    let Ok(_one) = profiler.0.try_lock() else {
        return Err((
            StatusCode::CONFLICT,
            "a CPU profile is already being taken\n".into(),
        ));
    };
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(|e| busy(format!("cannot start the CPU profiler: {e}\n")))?;
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let profile = tokio::task::spawn_blocking(move || {
        let report = guard.report().build()?;
        report.pprof()
    })
    .await
    .map_err(|e| busy(format!("{e}\n")))?
    .map_err(|e| busy(format!("cannot build the CPU profile: {e}\n")))?;
    let raw = pprof::protos::Message::encode_to_vec(&profile);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw)
        .and_then(|()| gz.finish())
        .map_err(|e| busy(format!("{e}\n")))
}

/// Switches jemalloc's heap sampling on (it is compiled in, inactive).
async fn activate_heap() {
    let Some(ctl) = jemalloc_pprof::PROF_CTL.as_ref() else {
        tracing::info!("heap profiles unavailable: the allocator is not jemalloc with profiling");
        return;
    };
    if let Err(e) = ctl.lock().await.activate() {
        tracing::warn!("cannot switch heap profiling on: {e}");
    }
}

/// jemalloc's heap profile, gzipped pprof.
async fn heap() -> Answer {
    let unavailable = || {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "heap profiles need the weft binary's allocator (jemalloc with profiling)\n"
                .to_string(),
        )
    };
    let ctl = jemalloc_pprof::PROF_CTL.as_ref().ok_or_else(unavailable)?;
    let mut ctl = ctl.lock().await;
    if !ctl.activated() {
        return Err(unavailable());
    }
    ctl.dump_pprof()
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_default_to_30_and_are_bounded() {
        assert_eq!(seconds(None), Ok(30));
        assert_eq!(seconds(Some("debug=1&seconds=5")), Ok(5));
        assert!(seconds(Some("seconds=0")).is_err());
        assert!(
            seconds(Some("seconds=301"))
                .unwrap_err()
                .contains("seconds=301")
        );
        assert!(seconds(Some("seconds=x")).is_err());
    }
}
