use super::*;

#[test]
fn a_repository_needs_exactly_one_kind_and_says_what_is_wrong() {
    let err = ArtifactRepository::parse("controller config", "{}")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "artifact repository controller config: set one of `s3` and `local`"
    );
    let both = "s3: {bucket: b}\nlocal: {path: /tmp/x}\n";
    let err = ArtifactRepository::parse("cm team-a/artifacts", both)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not both"), "{err}");
    let http = "s3: {bucket: b, endpoint: 'http://127.0.0.1:9000'}\n";
    let err = ArtifactRepository::parse("x", http)
        .unwrap_err()
        .to_string();
    assert!(err.contains("plain http: set `insecure: true`"), "{err}");
    let typo = "s3: {bucket: b, endpiont: 'https://s3'}\n";
    let err = ArtifactRepository::parse("x", typo)
        .unwrap_err()
        .to_string();
    assert!(err.contains("endpiont"), "{err}");
    let ok = "s3: {bucket: b, endpoint: 'http://127.0.0.1:9000', insecure: true, prefix: weft}\n";
    let repo = ArtifactRepository::parse("x", ok).unwrap();
    assert_eq!(repo.describe(), "s3://b/weft at http://127.0.0.1:9000");
}

#[test]
fn credentials_never_show_their_secret() {
    let c = Credentials {
        access_key_id: "AK".into(),
        secret_access_key: "very-secret".into(),
    };
    let shown = format!("{c:?}");
    assert!(
        shown.contains("AK") && !shown.contains("very-secret"),
        "{shown}"
    );
}

#[test]
fn digests_are_sha256_and_refuse_anything_else() {
    let d = Digest::of(b"abc");
    assert_eq!(
        d.as_str(),
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert!(Digest::try_from("md5:abc".to_string()).is_err());
    assert!(Digest::try_from(format!("sha256:{}", "A".repeat(64))).is_err());
}

#[tokio::test]
async fn a_local_store_round_trips_a_file_lists_presigns_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let repo = ArtifactRepository {
        local: Some(LocalRepository {
            path: dir.path().join("repo"),
            prefix: "weft".into(),
        }),
        ..Default::default()
    };
    let store = Store::open(&repo, None).unwrap();
    let src = dir.path().join("in.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let key = attempt_key("ns", "wf", "u1", "train", 1, "model");
    let put = store.put_file(&key, &src).await.unwrap();
    assert_eq!(
        put,
        Stored {
            size: data.len() as u64,
            digest: Digest::of(&data)
        }
    );
    let back = dir.path().join("out.bin");
    assert_eq!(store.get_to_file(&key, &back).await.unwrap(), put);
    assert_eq!(std::fs::read(&back).unwrap(), data);
    assert_eq!(store.list("ns/wf").await.unwrap(), vec![key.clone()]);
    let url = store
        .presign(Method::GET, &key, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(url.scheme(), "file");
    assert_eq!(std::fs::read(url.to_file_path().unwrap()).unwrap(), data);
    store.delete(&key).await.unwrap();
    store.delete(&key).await.unwrap();
    assert!(store.list("ns").await.unwrap().is_empty());
    let err = store.get_bytes(&key).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("ns/wf/u1/train/1/model is not in file://"),
        "{err}"
    );
}

/// Every file under `dir`, relative, with its bytes.
pub(super) fn tree(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_directory_packs_to_the_same_digest_whenever_and_unpacks_to_the_same_tree() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for i in 0..50 {
        let sub = src.join(format!("d{}", i % 5));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(i + 1),
        )
        .unwrap();
    }
    let mut a = Vec::new();
    archive::pack_dir(&src, &mut a).unwrap();
    // Touch every file: the times change, the content does not.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    for (rel, data) in tree(&src) {
        std::fs::write(src.join(rel), data).unwrap();
    }
    let mut b = Vec::new();
    archive::pack_dir(&src, &mut b).unwrap();
    assert_eq!(Digest::of(&a), Digest::of(&b));
    archive::unpack_dir(&a[..], &dir.path().join("dst")).unwrap();
    assert_eq!(tree(&src), tree(&dir.path().join("dst")));
    std::fs::write(src.join("d0/f0.txt"), "changed").unwrap();
    let mut c = Vec::new();
    archive::pack_dir(&src, &mut c).unwrap();
    assert_ne!(Digest::of(&a), Digest::of(&c));
}
