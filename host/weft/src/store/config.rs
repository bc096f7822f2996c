//! Where artifacts live: the artifact repository as the controller's
//! configuration and a namespace's ConfigMap name it (Argo's
//! `artifactRepository`: S3-compatible or, for `weft dev` and `weft run`,
//! a local directory).

use serde::{Deserialize, Serialize};

/// One artifact repository: exactly one of `s3` and `local`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactRepository {
    /// An S3-compatible store (AWS S3, SeaweedFS, MinIO, Ceph RGW, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Repository>,
    /// A directory of the controller's machine: the embedded default of
    /// `weft dev` and `weft run`, where pods are local processes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalRepository>,
}

/// An S3-compatible bucket.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct S3Repository {
    /// `https://host[:port]` (or `http://` with `insecure: true`); absent
    /// for AWS S3 itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The bucket every key goes into.
    pub bucket: String,
    /// The region to sign for (`us-east-1` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// A key prefix under which all of Weft's objects go.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    /// Allows a plain `http://` endpoint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// The Secret key holding the access key id (in the controller's
    /// namespace, or the ConfigMap's for a namespace's repository).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_key_secret: Option<SecretKeyRef>,
    /// The Secret key holding the secret access key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_secret: Option<SecretKeyRef>,
}

/// A key of a Secret (`name`, `key`), as Argo's `accessKeySecret`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The key inside it.
    pub key: String,
}

/// A local directory.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalRepository {
    /// The directory (created when missing).
    pub path: std::path::PathBuf,
    /// A key prefix inside it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
}

/// The credentials of an S3 repository, read from its Secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The access key id.
    pub access_key_id: String,
    /// The secret access key (never logged: see the Debug impl).
    pub secret_access_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

impl ArtifactRepository {
    /// Parses a repository from YAML or JSON, naming `what` (the file or
    /// ConfigMap) in the error.
    pub fn parse(what: &str, text: &str) -> anyhow::Result<ArtifactRepository> {
        let repo: ArtifactRepository = serde_yaml::from_str(text)
            .map_err(|e| anyhow::anyhow!("artifact repository {what}: {e}"))?;
        repo.check()
            .map_err(|e| anyhow::anyhow!("artifact repository {what}: {e}"))?;
        Ok(repo)
    }

    /// Exactly one kind, and an S3 repository's fields make sense.
    pub fn check(&self) -> Result<(), String> {
        match (&self.s3, &self.local) {
            (Some(_), Some(_)) => Err("set one of `s3` and `local`, not both".into()),
            (None, None) => Err("set one of `s3` and `local`".into()),
            (Some(s3), None) => s3.check(),
            (None, Some(l)) if l.path.as_os_str().is_empty() => Err("`local.path` is empty".into()),
            (None, Some(_)) => Ok(()),
        }
    }

    /// How the repository shows in messages: `s3://bucket/prefix at
    /// endpoint` or `file:///path/prefix` (never credentials).
    pub fn describe(&self) -> String {
        if let Some(s3) = &self.s3 {
            let at = s3.endpoint.as_deref().unwrap_or("AWS S3");
            return format!("s3://{}/{} at {at}", s3.bucket, s3.prefix);
        }
        let l = self.local.clone().unwrap_or_default();
        format!("file://{}/{}", l.path.display(), l.prefix)
    }
}

impl S3Repository {
    fn check(&self) -> Result<(), String> {
        if self.bucket.is_empty() {
            return Err("`s3.bucket` is empty".into());
        }
        if let Some(e) = &self.endpoint {
            let url = url::Url::parse(e).map_err(|err| format!("`s3.endpoint` {e:?}: {err}"))?;
            match url.scheme() {
                "https" => {}
                "http" if self.insecure => {}
                "http" => {
                    return Err(format!(
                        "`s3.endpoint` {e:?} is plain http: set `insecure: true` to allow it"
                    ));
                }
                other => {
                    return Err(format!(
                        "`s3.endpoint` {e:?}: scheme {other:?} is neither https nor http"
                    ));
                }
            }
        }
        match (&self.access_key_secret, &self.secret_key_secret) {
            (Some(_), None) | (None, Some(_)) => {
                Err("`s3.accessKeySecret` and `s3.secretKeySecret` go together".into())
            }
            _ => Ok(()),
        }
    }
}

/// The credentials of `repo`: for S3, the keys its Secrets name (read in
/// `namespace`), else `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` of
/// the controller's environment; none for a local directory. A missing
/// Secret or key is an error naming it.
pub async fn credentials(
    client: &kube::Client,
    namespace: &str,
    repo: &ArtifactRepository,
) -> anyhow::Result<Option<Credentials>> {
    let Some(s3) = &repo.s3 else {
        return Ok(None);
    };
    let (Some(id), Some(secret)) = (&s3.access_key_secret, &s3.secret_key_secret) else {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        return Ok(env("AWS_ACCESS_KEY_ID")
            .zip(env("AWS_SECRET_ACCESS_KEY"))
            .map(|(access_key_id, secret_access_key)| Credentials {
                access_key_id,
                secret_access_key,
            }));
    };
    Ok(Some(Credentials {
        access_key_id: secret_key(client, namespace, id).await?,
        secret_access_key: secret_key(client, namespace, secret).await?,
    }))
}

async fn secret_key(
    client: &kube::Client,
    namespace: &str,
    r: &SecretKeyRef,
) -> anyhow::Result<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), namespace);
    let what = format!("artifact repository Secret {namespace}/{}", r.name);
    let s = api
        .get_opt(&r.name)
        .await
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))?
        .ok_or_else(|| anyhow::anyhow!("{what} does not exist"))?;
    let bytes = s
        .data
        .and_then(|mut d| d.remove(&r.key))
        .ok_or_else(|| anyhow::anyhow!("{what} has no key {:?}", r.key))?;
    String::from_utf8(bytes.0)
        .map(|v| v.trim().to_string())
        .map_err(|_| anyhow::anyhow!("{what}: key {:?} is not UTF-8", r.key))
}
