//! The data plane's object store against a real S3 server: SeaweedFS from
//! PyPI (`tests/support/seaweedfs.sh`), one server for this file, on
//! loopback. Checked through the store layer and through presigned URLs
//! fetched with curl, as a pod holding only a URL would.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use object_store::signer::Method;
use weft::store::{Credentials, Store, StoreError, attempt_key};

use common::s3::{repo, store};

/// curl with a URL only (no credentials): its HTTP status. The body goes
/// to `-o FILE` when the arguments name one, else nowhere.
fn curl(args: &[&str]) -> u16 {
    let sink: &[&str] = if args.contains(&"-o") {
        &[]
    } else {
        &["-o", "/dev/null"]
    };
    let out = Command::new("curl")
        .args(["-s", "-w", "%{http_code}"])
        .args(sink)
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

fn random_file(path: &Path, size: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e3779b97f4a7c15;
    let data: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

#[tokio::test]
async fn a_file_streams_up_and_down_with_its_digest_and_is_listed_and_deleted() {
    let s = store("round-trip");
    let dir = tempfile::tempdir().unwrap();
    let data = random_file(&dir.path().join("in"), 40 << 20);
    let key = attempt_key("team-a", "train", "uid-1", "fit", 1, "model");
    let put = s.put_file(&key, &dir.path().join("in")).await.unwrap();
    assert_eq!(put.size, data.len() as u64);
    assert_eq!(put.digest, weft::store::Digest::of(&data));
    let got = s.get_to_file(&key, &dir.path().join("out")).await.unwrap();
    assert_eq!(got, put);
    assert_eq!(std::fs::read(dir.path().join("out")).unwrap(), data);
    s.put_bytes("team-a/train/uid-1/fit/1/outputs.json", b"{}".to_vec())
        .await
        .unwrap();
    let keys = s.list("team-a/train/uid-1").await.unwrap();
    assert_eq!(
        keys,
        vec![
            key.clone(),
            "team-a/train/uid-1/fit/1/outputs.json".to_string()
        ]
    );
    for k in &keys {
        s.delete(k).await.unwrap();
    }
    s.delete(&key).await.unwrap();
    assert!(s.list("team-a").await.unwrap().is_empty());
    let err = s.get_bytes(&key).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn presigned_urls_move_bytes_for_one_key_only_and_expire() {
    let s = store("presigned");
    let dir = tempfile::tempdir().unwrap();
    let data = random_file(&dir.path().join("up"), 3 << 20);
    let key = attempt_key("team-a", "etl", "uid-2", "extract", 1, "rows");
    let put = s
        .presign(Method::PUT, &key, Duration::from_secs(300))
        .await
        .unwrap();
    let up = dir.path().join("up").display().to_string();
    assert_eq!(curl(&["-X", "PUT", "-T", &up, put.as_str()]), 200);
    assert_eq!(s.get_bytes(&key).await.unwrap(), data);

    let get = s
        .presign(Method::GET, &key, Duration::from_secs(300))
        .await
        .unwrap();
    let down = dir.path().join("down").display().to_string();
    assert_eq!(curl(&["-o", &down, get.as_str()]), 200);
    assert_eq!(std::fs::read(&down).unwrap(), data);

    // The signature covers the key: the same URL for another key is refused.
    let other = get.as_str().replace("/extract/1/rows", "/extract/1/other");
    assert_eq!(curl(&[&other]), 403);
    // No signature, no access.
    let bare = format!("{}/presigned/weft/{key}", common::s3::server().endpoint);
    assert_eq!(curl(&[&bare]), 403);
    // An expired URL is refused.
    let short = s
        .presign(Method::GET, &key, Duration::from_secs(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(curl(&[short.as_str()]), 403);
}

#[tokio::test]
async fn wrong_credentials_and_a_missing_file_name_the_key_and_the_repository() {
    let wrong = Credentials {
        access_key_id: common::s3::server().credentials.access_key_id.clone(),
        secret_access_key: "nope".into(),
    };
    let s = Store::open(&repo("refused"), Some(&wrong)).unwrap();
    let err = s
        .put_bytes("k/1", b"x".to_vec())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("put k/1 in s3://refused/weft at http://127.0.0.1:"),
        "{err}"
    );
    let err = store("refused")
        .put_file("k/2", Path::new("/nonexistent/file"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("open /nonexistent/file"), "{err}");
    let err = Store::open(&repo("refused"), None).unwrap_err().to_string();
    assert!(err.contains("no credentials"), "{err}");
    let _ = &common::s3::server().dir;
}

/// Runs the built `weft io` as a pod would: (success, stdout, stderr).
fn weft_io(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weft"))
        .arg("io")
        .args(args)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test]
async fn weft_io_moves_a_thousand_file_directory_with_urls_only_and_checks_the_digest() {
    let s = store("weft-io");
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("out");
    for i in 0..1_000 {
        let sub = src.join(format!("part-{}", i % 10));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join(format!("{i}.csv")),
            format!("{i},{}\n", i * i).repeat(20),
        )
        .unwrap();
    }
    let key = attempt_key("team-a", "etl", "uid-3", "load", 1, "table");
    let put = s
        .presign(Method::PUT, &key, Duration::from_secs(300))
        .await
        .unwrap();
    let src_arg = src.display().to_string();
    let (ok, stdout, stderr) = weft_io(&[
        "put",
        "--artifact",
        "table",
        "--path",
        &src_arg,
        "--url",
        put.as_str(),
    ]);
    assert!(ok, "{stderr}");
    let answer: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(answer["kind"], "directory");
    let digest = answer["digest"].as_str().unwrap().to_string();
    // What the store holds is what weft io said it uploaded.
    assert_eq!(
        weft::store::Digest::of(&s.get_bytes(&key).await.unwrap()).as_str(),
        digest
    );

    let get = s
        .presign(Method::GET, &key, Duration::from_secs(300))
        .await
        .unwrap();
    let dst = dir.path().join("in");
    let dst_arg = dst.display().to_string();
    let args = [
        "get",
        "--artifact",
        "table",
        "--url",
        get.as_str(),
        "--path",
        &dst_arg,
        "--kind",
        "directory",
        "--digest",
        &digest,
    ];
    let (ok, _, stderr) = weft_io(&args);
    assert!(ok, "{stderr}");
    let count = walk_files(&dst);
    assert_eq!(count, 1_000);
    assert_eq!(
        std::fs::read(dst.join("part-7/517.csv")).unwrap(),
        std::fs::read(src.join("part-7/517.csv")).unwrap()
    );

    // A digest the store does not match fails and names the artifact.
    let wrong = format!("sha256:{}", "0".repeat(64));
    let other = dir.path().join("other").display().to_string();
    let args = [
        "get",
        "--artifact",
        "table",
        "--url",
        get.as_str(),
        "--path",
        &other,
        "--kind",
        "directory",
        "--digest",
        &wrong,
    ];
    let (ok, _, stderr) = weft_io(&args);
    assert!(!ok);
    assert!(
        stderr.contains("artifact table: digest mismatch"),
        "{stderr}"
    );
    // A declared output that does not exist names the artifact and path.
    let (ok, _, stderr) = weft_io(&[
        "put",
        "--artifact",
        "model",
        "--path",
        "/nonexistent/model.bin",
        "--url",
        put.as_str(),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("artifact model: output path /nonexistent/model.bin does not exist"),
        "{stderr}"
    );
    // An expired URL: the store's refusal, with its reason.
    let short = s
        .presign(Method::GET, &key, Duration::from_secs(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (ok, _, stderr) = weft_io(&[
        "get",
        "--artifact",
        "table",
        "--url",
        short.as_str(),
        "--path",
        &other,
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("artifact table: download refused by the store: HTTP 403"),
        "{stderr}"
    );
}

fn walk_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            if p.is_dir() { walk_files(&p) } else { 1 }
        })
        .sum()
}
