//! The webhook's serving certificate, as propeller's init-certs makes it,
//! plus what init-certs leaves to a restart: renewal.
//!
//! Managed mode (the default): a CA and a certificate for the webhook's
//! names live in one Secret (`weft-webhook-certs`), so every replica serves
//! the same one. The first replica to start makes them; whoever finds the
//! certificate in the last third of its validity renews it with the same CA
//! (an update with the Secret's resourceVersion: of two replicas renewing
//! at once, one wins and the other takes its certificate). Each replica
//! polls the Secret and swaps the certificate it serves without dropping a
//! connection, and writes the CA into the `caBundle` of its webhook
//! configurations whenever they hold another (at start, and again when an
//! operator re-applies them with an empty one). Because the CA does not
//! change on renewal, the API server trusts old and new certificates alike:
//! no request fails across a rotation.
//!
//! Operator mode: `tls.crt`/`tls.key` in a directory (cert-manager's
//! Secret, mounted), re-read when they change; cert-manager's CA injector
//! owns the caBundle then.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;

/// When the certificate expires (Unix seconds), on the Secret.
const NOT_AFTER: &str = "weft.dev/not-after";
/// The names it is for, comma-separated, on the Secret.
const NAMES: &str = "weft.dev/names";
/// The CA lives this many certificate lifetimes (at least ten years).
const CA_LIFETIMES: u32 = 100;

/// A CA and the certificate it signed (PEM).
#[derive(Clone, PartialEq, Eq)]
pub struct Issued {
    /// The CA certificate: the caBundle.
    pub ca_cert: String,
    ca_key: String,
    /// The serving certificate.
    pub cert: String,
    /// Its key.
    pub key: String,
    /// The serving certificate's expiry.
    pub not_after: SystemTime,
    names: Vec<String>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("not_after", &self.not_after)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

fn ca_params() -> anyhow::Result<rcgen::CertificateParams> {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "weft webhook CA");
    Ok(p)
}

impl Issued {
    /// A new CA and a certificate for `names` valid for `validity`.
    pub fn new(names: &[String], validity: Duration) -> anyhow::Result<Self> {
        let ca_key = rcgen::KeyPair::generate()?;
        let mut params = ca_params()?;
        let now = SystemTime::now();
        params.not_before = (now - Duration::from_secs(3600)).into();
        let ca_life = (validity * CA_LIFETIMES).max(Duration::from_secs(10 * 365 * 86400));
        params.not_after = (now + ca_life).into();
        let ca = params.self_signed(&ca_key)?;
        let base = Issued {
            ca_cert: ca.pem(),
            ca_key: ca_key.serialize_pem(),
            cert: String::new(),
            key: String::new(),
            not_after: now,
            names: Vec::new(),
        };
        base.renewed(names, validity)
    }

    /// A new certificate from the same CA.
    pub fn renewed(&self, names: &[String], validity: Duration) -> anyhow::Result<Self> {
        let ca_key = rcgen::KeyPair::from_pem(&self.ca_key)?;
        let ca = ca_params()?;
        let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
        let key = rcgen::KeyPair::generate()?;
        let now = SystemTime::now();
        let mut params = rcgen::CertificateParams::new(names.to_vec())?;
        // A little slack for clocks that disagree; the lifetime counts from now.
        params.not_before = (now - Duration::from_secs(60)).into();
        let not_after = now + validity;
        params.not_after = not_after.into();
        let cert = params.signed_by(&key, &issuer)?;
        Ok(Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
            not_after: UNIX_EPOCH + Duration::from_secs(secs(not_after)),
            names: names.to_vec(),
            ..self.clone()
        })
    }

    /// Whether to renew: other names, or the last third of its validity.
    pub fn due(&self, names: &[String], validity: Duration) -> bool {
        self.names != names || SystemTime::now() + validity / 3 >= self.not_after
    }

    fn from_secret(s: &Secret) -> Option<Self> {
        let data = s.data.as_ref()?;
        let text = |k: &str| {
            data.get(k)
                .and_then(|b| String::from_utf8(b.0.clone()).ok())
        };
        let ann = s.metadata.annotations.as_ref()?;
        Some(Issued {
            ca_cert: text("ca.crt")?,
            ca_key: text("ca.key")?,
            cert: text("tls.crt")?,
            key: text("tls.key")?,
            not_after: UNIX_EPOCH + Duration::from_secs(ann.get(NOT_AFTER)?.parse().ok()?),
            names: ann
                .get(NAMES)?
                .split(',')
                .filter(|n| !n.is_empty())
                .map(String::from)
                .collect(),
        })
    }

    fn to_secret(&self, ns: &str, name: &str, resource_version: Option<String>) -> Secret {
        let data = [
            ("ca.crt", &self.ca_cert),
            ("ca.key", &self.ca_key),
            ("tls.crt", &self.cert),
            ("tls.key", &self.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect();
        let annotations = BTreeMap::from([
            (NOT_AFTER.to_string(), secs(self.not_after).to_string()),
            (NAMES.to_string(), self.names.join(",")),
        ]);
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                annotations: Some(annotations),
                resource_version,
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(data),
            ..Default::default()
        }
    }

    /// Writes `ca.crt`, `tls.crt` and `tls.key` to `dir` (for tools that
    /// want the files, e.g. curl in tests).
    pub fn write_to(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (f, text) in [
            ("ca.crt", &self.ca_cert),
            ("tls.crt", &self.cert),
            ("tls.key", &self.key),
        ] {
            std::fs::write(dir.join(f), text)
                .with_context(|| format!("writing {}/{f}", dir.display()))?;
        }
        Ok(())
    }
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

/// What the TLS server presents; swapped in place on renewal.
#[derive(Debug)]
pub struct Resolver(RwLock<Arc<CertifiedKey>>);

fn certified(cert: &str, key: &str) -> anyhow::Result<Arc<CertifiedKey>> {
    let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .context("webhook certificate")?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).context("webhook key")?;
    let signing = tokio_rustls::rustls::crypto::ring::sign::any_supported_type(&key)
        .context("webhook key type")?;
    Ok(Arc::new(CertifiedKey::new(chain, signing)))
}

impl Resolver {
    /// Serves `cert` with `key` (PEM).
    pub fn new(cert: &str, key: &str) -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Resolver(RwLock::new(certified(cert, key)?))))
    }

    /// Serves another certificate from the next handshake on.
    pub fn set(&self, cert: &str, key: &str) -> anyhow::Result<()> {
        let next = certified(cert, key)?;
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The managed certificate of one webhook deployment.
#[derive(Clone)]
pub struct Managed {
    /// The cluster.
    pub client: Client,
    /// The Secret's namespace (the webhook's own).
    pub namespace: String,
    /// The Secret's name.
    pub secret: String,
    /// DNS names or IP addresses the certificate is for.
    pub names: Vec<String>,
    /// How long each certificate is valid.
    pub validity: Duration,
    /// Webhook configurations (validating or mutating) whose caBundle is
    /// kept on the CA.
    pub configurations: Vec<String>,
    /// Where to also write the files, if anywhere.
    pub write_dir: Option<PathBuf>,
}

impl Managed {
    /// The current certificate: the Secret's, renewed when due, or a new CA
    /// and certificate when there is none.
    pub async fn ensure(&self) -> anyhow::Result<Issued> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
        for _ in 0..5 {
            let found = api.get_opt(&self.secret).await?;
            let current = found.as_ref().and_then(Issued::from_secret);
            if let Some(c) = &current
                && !c.due(&self.names, self.validity)
            {
                return Ok(c.clone());
            }
            let next = match &current {
                Some(c) => c.renewed(&self.names, self.validity)?,
                None => Issued::new(&self.names, self.validity)?,
            };
            let rv = found.and_then(|s| s.metadata.resource_version);
            let secret = next.to_secret(&self.namespace, &self.secret, rv.clone());
            let written = match rv {
                Some(_) => {
                    api.replace(&self.secret, &PostParams::default(), &secret)
                        .await
                }
                None => api.create(&PostParams::default(), &secret).await,
            };
            match written {
                Ok(_) => {
                    tracing::info!(secret = %self.secret, namespace = %self.namespace, names = ?self.names,
                        valid_for = ?self.validity, renewed = current.is_some(), "webhook certificate issued");
                    return Ok(next);
                }
                // Another replica wrote it first: take theirs.
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => {
                    return Err(e)
                        .context(format!("writing Secret {}/{}", self.namespace, self.secret));
                }
            }
        }
        anyhow::bail!("Secret {}/{} kept changing", self.namespace, self.secret)
    }

    /// Sets every webhook's caBundle in the configurations to `ca`; absent
    /// configurations are skipped (an install may leave one out). Each name
    /// is looked up as a validating, then a mutating configuration; a
    /// refusal counts as absent, since least-privilege RBAC grants `get` on
    /// each name for its own kind only.
    pub async fn patch_ca_bundles(&self, ca: &str) -> anyhow::Result<()> {
        use base64::Engine as _;
        let want = base64::engine::general_purpose::STANDARD.encode(ca);
        for entry in &self.configurations {
            // `validating/NAME` and `mutating/NAME` name the kind, so only
            // that one is read: a Role limited to the configurations' names
            // (deploy/'s) answers 403 to a probe of the other kind.
            match entry.split_once('/') {
                Some(("validating", name)) => {
                    self.patch_bundle(super::VALIDATING_KIND, name, &want)
                        .await?;
                }
                Some(("mutating", name)) => {
                    self.patch_bundle(super::MUTATING_KIND, name, &want).await?;
                }
                _ => {
                    if !self
                        .patch_bundle(super::VALIDATING_KIND, entry, &want)
                        .await?
                    {
                        self.patch_bundle(super::MUTATING_KIND, entry, &want)
                            .await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sets the caBundle (base64) of every webhook of one configuration;
    /// whether it exists and may be read.
    async fn patch_bundle(&self, kind: &str, name: &str, want: &str) -> anyhow::Result<bool> {
        let api = super::configuration_api(&self.client, kind);
        let mut config = match api.get(name).await {
            Ok(c) => c,
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let mut changed = false;
        for w in config.data["webhooks"].as_array_mut().into_iter().flatten() {
            if w["clientConfig"]["caBundle"] != want {
                w["clientConfig"]["caBundle"] = want.into();
                changed = true;
            }
        }
        if changed {
            api.replace(name, &PostParams::default(), &config).await?;
            tracing::info!(configuration = %name, "caBundle patched");
        }
        Ok(true)
    }

    /// Start: the certificate to serve, with the caBundles patched.
    pub async fn start(&self) -> anyhow::Result<(Issued, Arc<Resolver>)> {
        let issued = self.ensure().await?;
        self.patch_ca_bundles(&issued.ca_cert).await?;
        if let Some(dir) = &self.write_dir {
            issued.write_to(dir)?;
        }
        let resolver = Resolver::new(&issued.cert, &issued.key)?;
        Ok((issued, resolver))
    }

    /// Keeps the served certificate and the caBundles current until the
    /// runtime stops; errors are logged and tried again on the next poll.
    pub async fn keep_fresh(self, mut serving: Issued, resolver: Arc<Resolver>) {
        let poll = (self.validity / 10).clamp(Duration::from_millis(500), Duration::from_secs(60));
        loop {
            tokio::time::sleep(poll).await;
            let step = async {
                let now = self.ensure().await?;
                self.patch_ca_bundles(&now.ca_cert).await?;
                if now != serving {
                    resolver.set(&now.cert, &now.key)?;
                    if let Some(dir) = &self.write_dir {
                        now.write_to(dir)?;
                    }
                    tracing::info!(
                        not_after = secs(now.not_after),
                        "serving the renewed webhook certificate"
                    );
                    serving = now;
                }
                anyhow::Ok(())
            };
            if let Err(e) = step.await {
                tracing::warn!(error = %format!("{e:#}"), "webhook certificate check failed; trying again");
            }
        }
    }
}

/// The operator's certificate files, re-read when they change.
pub async fn from_files(dir: &Path) -> anyhow::Result<Option<Arc<Resolver>>> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f));
    let (Ok(cert), Ok(key)) = (read("tls.crt"), read("tls.key")) else {
        return Ok(None);
    };
    let resolver = Resolver::new(&cert, &key)?;
    let (r, dir) = (resolver.clone(), dir.to_path_buf());
    tokio::spawn(async move {
        let mut last = cert;
        loop {
            tokio::time::sleep(Duration::from_secs(30)).await;
            let read = |f: &str| std::fs::read_to_string(dir.join(f));
            if let (Ok(cert), Ok(key)) = (read("tls.crt"), read("tls.key"))
                && cert != last
            {
                match r.set(&cert, &key) {
                    Ok(()) => {
                        tracing::info!(dir = %dir.display(), "serving the webhook certificate from changed files")
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the changed webhook certificate files do not load")
                    }
                }
                last = cert;
            }
        }
    });
    Ok(Some(resolver))
}
