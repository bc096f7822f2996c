//! A real S3 server for a test file: SeaweedFS from PyPI
//! (`tests/support/seaweedfs.sh`), one per test process, on loopback,
//! stopped by its watcher when the process ends.

use std::process::Command;
use std::sync::OnceLock;

use weft::store::{ArtifactRepository, Credentials, S3Repository, Store};

/// The file's SeaweedFS: its directory (kept until the process ends),
/// endpoint and admin credentials.
pub struct Seaweed {
    pub dir: std::path::PathBuf,
    pub endpoint: String,
    pub credentials: Credentials,
}

static SERVER: OnceLock<Seaweed> = OnceLock::new();

/// The server, started on first use.
pub fn server() -> &'static Seaweed {
    SERVER.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let out = Command::new("bash")
            .arg(super::root().join("tests/support/seaweedfs.sh"))
            .arg("start")
            .arg(&dir)
            .env("WEFT_S3_WATCH_PID", std::process::id().to_string())
            .env("WEFT_S3_REMOVE", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "seaweedfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let endpoint = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let env = std::fs::read_to_string(dir.join("credentials.env")).unwrap();
        let get = |k: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .unwrap()
                .to_string()
        };
        let credentials = Credentials {
            access_key_id: get("AWS_ACCESS_KEY_ID"),
            secret_access_key: get("AWS_SECRET_ACCESS_KEY"),
        };
        Seaweed {
            dir,
            endpoint,
            credentials,
        }
    })
}

/// A repository of `bucket` on the server, under the prefix `weft`.
pub fn repo(bucket: &str) -> ArtifactRepository {
    ArtifactRepository {
        s3: Some(S3Repository {
            endpoint: Some(server().endpoint.clone()),
            bucket: bucket.into(),
            prefix: "weft".into(),
            insecure: true,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The repository of `bucket`, opened with the admin credentials.
pub fn store(bucket: &str) -> Store {
    Store::open(&repo(bucket), Some(&server().credentials)).unwrap()
}

/// The repository of `bucket` as `weft controller --artifact-repository`
/// reads it, its credentials named from the Secret `s3-credentials`
/// (keys `accessKey`, `secretKey`), written to `file`.
pub fn secret_repository_file(bucket: &str, file: &std::path::Path) {
    let mut repo = repo(bucket);
    let r = repo.s3.as_mut().unwrap();
    for (slot, key) in [
        (&mut r.access_key_secret, "accessKey"),
        (&mut r.secret_key_secret, "secretKey"),
    ] {
        *slot = Some(weft::store::SecretKeyRef {
            name: "s3-credentials".into(),
            key: key.into(),
        });
    }
    std::fs::write(file, serde_yaml::to_string(&repo).unwrap()).unwrap();
}

/// The Secret `s3-credentials` of `namespace` with the server's access
/// key and `secret_key`, applied with kubectl.
pub async fn apply_secret(kubeconfig: &std::path::Path, namespace: &str, secret_key: &str) {
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s3-credentials", "namespace": namespace},
        "stringData": {"accessKey": server().credentials.access_key_id,
                       "secretKey": secret_key}});
    super::kubectl_ok(kubeconfig, &["apply", "-f", "-"], Some(&secret.to_string())).await;
}
