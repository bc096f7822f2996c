//! What `weft io` costs a pod (issue 42): one 1 GiB artifact up and down
//! through a presigned URL against a real S3 server (SeaweedFS on
//! loopback, `tests/support/seaweedfs.sh`), next to the same transfer by a
//! bare HTTP client (curl with the same kind of URL) in the same run,
//! alternating, three times each. Both run under GNU time, which gives
//! their wall time and peak RSS the same way. `weft io` also hashes every
//! byte (sha256) and checks the digest on the way down; curl does neither.
//!
//! `cargo bench -p weft --bench io` (release build); `IO_BENCH_MIB` sets
//! the size (default 1024), `IO_BENCH_ROUNDS` the rounds (default 3).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use object_store::signer::Method;
use weft::store::{ArtifactRepository, Credentials, S3Repository, Store};

/// One timed transfer: wall seconds and peak RSS in MiB.
#[derive(Clone, Copy, Debug)]
struct Run {
    secs: f64,
    rss_mib: f64,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Starts SeaweedFS in `dir`: its endpoint and admin credentials.
fn seaweed(dir: &Path) -> anyhow::Result<(String, Credentials)> {
    let out = Command::new("bash")
        .arg(root().join("tests/support/seaweedfs.sh"))
        .arg("start")
        .arg(dir)
        .env("WEFT_S3_WATCH_PID", std::process::id().to_string())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "seaweedfs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = std::fs::read_to_string(dir.join("credentials.env"))?;
    let get = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_default()
            .to_string()
    };
    let endpoint = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let creds = Credentials {
        access_key_id: get("AWS_ACCESS_KEY_ID"),
        secret_access_key: get("AWS_SECRET_ACCESS_KEY"),
    };
    Ok((endpoint, creds))
}

/// A file of `mib` MiB of pseudo-random bytes (incompressible), written
/// in 1 MiB chunks.
fn random_file(path: &Path, mib: usize) -> anyhow::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunk = vec![0u8; 1 << 20];
    for _ in 0..mib {
        for b in chunk.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
        }
        f.write_all(&chunk)?;
    }
    f.flush()?;
    Ok(())
}

/// Runs `args` under GNU time; fails with its stderr when it fails.
fn timed(args: &[&str]) -> anyhow::Result<Run> {
    let report = tempfile::NamedTempFile::new()?;
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%e %M", "-o"])
        .arg(report.path())
        .args(args)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(report.path())?;
    let mut fields = text.split_whitespace();
    let secs: f64 = fields.next().unwrap_or("0").parse()?;
    let kib: f64 = fields.next().unwrap_or("0").parse()?;
    Ok(Run {
        secs,
        rss_mib: kib / 1024.0,
    })
}

fn median(runs: &[Run], f: impl Fn(&Run) -> f64) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(f).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mib: usize = std::env::var("IO_BENCH_MIB").map_or(Ok(1024), |v| v.parse())?;
    let rounds: usize = std::env::var("IO_BENCH_ROUNDS").map_or(Ok(3), |v| v.parse())?;
    let dir = tempfile::tempdir()?;
    let (endpoint, creds) = seaweed(&dir.path().join("s3"))?;
    let repo = ArtifactRepository {
        s3: Some(S3Repository {
            endpoint: Some(endpoint),
            bucket: "bench".into(),
            insecure: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let store = Store::open(&repo, Some(&creds))?;
    let file = dir.path().join("artifact");
    random_file(&file, mib)?;
    let (file_s, out_s) = (file.to_str().unwrap(), dir.path().join("out"));
    let out_s = out_s.to_str().unwrap();
    let weft = env!("CARGO_BIN_EXE_weft");
    let ttl = Duration::from_secs(3600);
    let (mut up, mut down) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for round in 0..rounds {
        for (i, who) in ["weft io", "curl"].into_iter().enumerate() {
            let key = format!("{who}/{round}").replace(' ', "-");
            let put = store.presign(Method::PUT, &key, ttl).await?.to_string();
            let get = store.presign(Method::GET, &key, ttl).await?.to_string();
            let _ = std::fs::remove_file(out_s);
            let (u, d) = if i == 0 {
                let u = timed(&[
                    weft,
                    "io",
                    "put",
                    "--artifact",
                    "a",
                    "--path",
                    file_s,
                    "--url",
                    &put,
                ])?;
                let d = timed(&[
                    weft,
                    "io",
                    "get",
                    "--artifact",
                    "a",
                    "--url",
                    &get,
                    "--path",
                    out_s,
                ])?;
                (u, d)
            } else {
                let u = timed(&["curl", "-sSf", "-T", file_s, &put])?;
                let d = timed(&["curl", "-sSf", "-o", out_s, &get])?;
                (u, d)
            };
            anyhow::ensure!(
                std::fs::metadata(out_s)?.len() == (mib as u64) << 20,
                "{who}: the download is not the whole file"
            );
            up[i].push(u);
            down[i].push(d);
            store.delete(&key).await?;
        }
    }
    println!("{mib} MiB artifact, median of {rounds} rounds, SeaweedFS on loopback:");
    println!(
        "| direction | weft io | curl (bare client) | weft io / curl | weft io peak RSS | curl peak RSS |"
    );
    println!("|---|---|---|---|---|---|");
    for (what, runs) in [("upload (PUT)", &up), ("download (GET)", &down)] {
        let (w, c) = (median(&runs[0], |r| r.secs), median(&runs[1], |r| r.secs));
        let (wr, cr) = (
            median(&runs[0], |r| r.rss_mib),
            median(&runs[1], |r| r.rss_mib),
        );
        println!(
            "| {what} | {w:.2} s ({:.0} MiB/s) | {c:.2} s ({:.0} MiB/s) | {:.2} | {wr:.1} MiB | {cr:.1} MiB |",
            mib as f64 / w,
            mib as f64 / c,
            w / c
        );
    }
    let _ = Command::new("bash")
        .arg(root().join("tests/support/seaweedfs.sh"))
        .arg("stop")
        .arg(dir.path().join("s3"))
        .status();
    Ok(())
}
