//! The real control plane as a test bed (issue 39): etcd, kube-apiserver,
//! kube-controller-manager (garbage collector, namespace, resource quota and Job controllers) and
//! kube-scheduler, built from their Go modules by `tests/k8s/build.sh` and
//! started here as envtest starts them, one cluster per test file.
//!
//! TLS everywhere as in a cluster: one CA signs the API server's serving
//! certificate, the admin's client certificate (`system:masters`), the
//! API server's client certificate for kubelets and the nodes' serving
//! certificates. `--authorization-mode=Node,RBAC`, a service-account
//! issuer and keys (TokenRequest works), and an audit policy that logs every
//! request's metadata to a file the tests read.
//!
//! The processes are stopped by PID, never by name: a reaper process
//! watches the test process and, once it is gone, stops them and removes the
//! cluster's directory (a test binary exits without running destructors).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{free_port, root};

/// A running control plane.
pub struct RealCluster {
    /// Holds everything: PKI, etcd's data, logs, the kubeconfig.
    pub dir: PathBuf,
    /// Admin kubeconfig (client certificate in `system:masters`).
    pub kubeconfig: PathBuf,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// The CA that signed every certificate of this cluster.
    pub ca: PathBuf,
    /// The directory of the control plane's binaries.
    pub bin: PathBuf,
    /// etcd's client port (plain HTTP on loopback).
    etcd_port: u16,
    pki: Pki,
    pids: Vec<(String, u32)>,
}

static SHARED: OnceLock<RealCluster> = OnceLock::new();

/// The test file's one control plane, started by the first test that asks.
pub fn shared() -> &'static RealCluster {
    SHARED.get_or_init(RealCluster::start)
}

/// The binaries' directory: `tests/k8s/build.sh` builds them once per
/// machine (the cache outside the work tree) and prints where.
pub fn binaries() -> PathBuf {
    let out = Command::new("bash")
        .arg(root().join("tests/k8s/build.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/k8s/build.sh");
    assert!(
        out.status.success(),
        "tests/k8s/build.sh failed (make k8s shows why)"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("build.sh prints the bin dir"))
}

struct Pki {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    dir: PathBuf,
}

impl Pki {
    fn new(dir: &Path) -> Pki {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "weft-test-k8s-ca");
        let ca = p.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.crt"), ca.pem()).unwrap();
        Pki {
            issuer: rcgen::Issuer::new(p, key),
            dir: dir.to_path_buf(),
        }
    }

    /// Writes `<name>.crt` / `<name>.key`: a serving certificate for
    /// `sans`, or a client certificate for `cn` in `groups`.
    fn issue(&self, name: &str, cn: &str, groups: &[&str], sans: &[&str]) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        // One group: rcgen keeps one value per attribute type.
        if let Some(g) = groups.first() {
            p.distinguished_name
                .push(rcgen::DnType::OrganizationName, *g);
        }
        p.extended_key_usages = vec![if sans.is_empty() {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        let (crt, k) = (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        );
        std::fs::write(&crt, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (crt, k)
    }
}

/// kwok's pod-complete stage for pods of any owner (upstream's is for Jobs'
/// pods only): Running pods end Succeeded after RUN_MS.
const KWOK_COMPLETE: &str = r#"---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete-any-owner
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
  delay:
    durationMilliseconds: RUN_MS
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
"#;

/// Every request's metadata, so tests can count what a user did.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

impl RealCluster {
    /// Starts a fresh control plane in a new directory under target/.
    pub fn start() -> RealCluster {
        RealCluster::start_with_crds(&[])
    }

    /// Starts a fresh control plane whose CRDs are deploy/'s and the YAML
    /// files of `extra` (another controller's, e.g. Argo's for the peers
    /// bench), all established before the garbage collector starts.
    pub fn start_with_crds(extra: &[PathBuf]) -> RealCluster {
        let bin = binaries();
        let started = Instant::now();
        let base = root().join("target/k8s-clusters");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("cluster-")
            .tempdir_in(&base)
            .unwrap()
            .keep();
        let pki = Pki::new(&dir);
        let ca = dir.join("ca.crt");
        let (api_crt, api_key) = pki.issue(
            "apiserver",
            "kube-apiserver",
            &[],
            &["localhost", "127.0.0.1", "kubernetes.default.svc"],
        );
        let (admin_crt, admin_key) = pki.issue("admin", "admin", &["system:masters"], &[]);
        let (kubelet_client_crt, kubelet_client_key) = pki.issue(
            "apiserver-kubelet-client",
            "kube-apiserver-kubelet-client",
            &["system:masters"],
            &[],
        );
        let (sa_key, sa_pub) = (dir.join("sa.key"), dir.join("sa.pub"));
        let sa = rcgen::KeyPair::generate().unwrap();
        std::fs::write(&sa_key, sa.serialize_pem()).unwrap();
        std::fs::write(&sa_pub, sa.public_key_pem()).unwrap();
        std::fs::write(dir.join("audit-policy.yaml"), AUDIT_POLICY).unwrap();

        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let server = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = dir.join("admin.kubeconfig");
        std::fs::write(
            &kubeconfig,
            kubeconfig_text(&server, &ca, &admin_crt, &admin_key),
        )
        .unwrap();
        let mut cluster = RealCluster {
            dir: dir.clone(),
            kubeconfig: kubeconfig.clone(),
            server,
            ca: ca.clone(),
            bin: bin.clone(),
            etcd_port,
            pki,
            pids: Vec::new(),
        };
        cluster.reap_after_test_process();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        cluster.spawn(
            "etcd",
            &[
                "--name=node0".into(),
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=node0={peer_url}"),
                "--unsafe-no-fsync=true".into(),
                "--quota-backend-bytes=8589934592".into(),
            ],
        );
        cluster.wait("etcd", 30, || http_ok(etcd_port, "/health"));
        let p = |f: &Path| f.display().to_string();
        cluster.spawn(
            "kube-apiserver",
            &[
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={api_port}"),
                format!("--tls-cert-file={}", p(&api_crt)),
                format!("--tls-private-key-file={}", p(&api_key)),
                format!("--client-ca-file={}", p(&ca)),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", p(&sa_pub)),
                format!("--service-account-signing-key-file={}", p(&sa_key)),
                "--service-cluster-ip-range=10.0.0.0/24".into(),
                "--authorization-mode=Node,RBAC".into(),
                // ServiceAccount: no default SA controller runs; the taint
                // plugin: no node-lifecycle controller removes not-ready.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition".into(),
                "--allow-privileged=true".into(),
                format!("--cert-dir={}", dir.join("apiserver-certs").display()),
                format!("--kubelet-client-certificate={}", p(&kubelet_client_crt)),
                format!("--kubelet-client-key={}", p(&kubelet_client_key)),
                format!("--kubelet-certificate-authority={}", p(&ca)),
                "--kubelet-preferred-address-types=InternalIP".into(),
                format!(
                    "--audit-policy-file={}",
                    dir.join("audit-policy.yaml").display()
                ),
                format!("--audit-log-path={}", dir.join("audit.log").display()),
                "--audit-log-maxsize=0".into(),
                // Services (which Weft's controller never watches) bypass
                // the watch cache: after compact_etcd() a watch from an old
                // resourceVersion of them is 410 Gone at once, where the
                // cache would keep serving its last 75 s or more.
                "--watch-cache-sizes=services#0".into(),
            ],
        );
        cluster.wait("kube-apiserver", 90, || {
            cluster
                .kubectl(&["get", "--raw", "/readyz"])
                .status
                .success()
        });
        cluster.install_crds(extra);
        for (name, port) in [
            ("kube-controller-manager", free_port()),
            ("kube-scheduler", free_port()),
        ] {
            let k = p(&kubeconfig);
            let mut args = vec![
                format!("--kubeconfig={k}"),
                format!("--authentication-kubeconfig={k}"),
                format!("--authorization-kubeconfig={k}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={port}"),
                "--leader-elect=false".into(),
            ];
            if name == "kube-controller-manager" {
                // The resource quota controller keeps ResourceQuota status.used
                // (admission answers "status unknown" until it has, and a
                // finished pod frees its share only through it: issue 44);
                // the Job controller runs k8s-resource tasks' Jobs (issue 42).
                args.push(
                    "--controllers=garbage-collector-controller,namespace-controller,resourcequota-controller,job-controller"
                        .into(),
                );
                args.push("--concurrent-gc-syncs=20".into());
            }
            cluster.spawn(name, &args);
        }
        eprintln!(
            "real control plane at {} ({}) up in {:.1} s",
            cluster.server,
            dir.display(),
            started.elapsed().as_secs_f64()
        );
        cluster
    }

    /// Applies deploy/crds before the controller-manager starts, as on a
    /// cluster where Weft is installed: the garbage collector watches only
    /// the kinds it discovered, and finds new CRDs in a resync every 30 s.
    /// A CRD installed after it started would leave a deleted Workflow's
    /// pods for up to that long (seen in CI: ttl.rs waited 30 s in vain).
    fn install_crds(&self, extra: &[PathBuf]) {
        let crds = root().join("deploy/crds");
        let crds = crds.display().to_string();
        let out = self.kubectl(&["apply", "--server-side", "-k", &crds]);
        assert!(out.status.success(), "kubectl apply -k {crds}: {out:?}");
        for file in extra {
            let f = file.display().to_string();
            let out = self.kubectl(&["apply", "--server-side", "-f", &f]);
            assert!(out.status.success(), "kubectl apply -f {f}: {out:?}");
        }
        let args = ["wait", "--for=condition=Established", "crd", "--all"];
        let out = self.kubectl(&args);
        assert!(out.status.success(), "kubectl wait for the CRDs: {out:?}");
    }

    fn spawn(&mut self, name: &str, args: &[String]) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).unwrap();
        let child: Child = Command::new(self.bin.join(name))
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.pids.push((name.to_string(), child.id()));
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("pids"))
            .unwrap();
        writeln!(f, "{}", child.id()).unwrap();
        // Stopped by the reaper process, by PID.
        std::mem::forget(child);
    }

    fn wait(&self, name: &str, secs: u64, ready: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if ready() {
                return;
            }
            if let Some((_, pid)) = self.pids.iter().find(|(n, _)| n == name) {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                assert!(
                    !stat.is_empty() && !stat.contains(") Z "),
                    "{name} exited; its log:\n{}",
                    self.log(name)
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("{name} not ready in {secs} s; its log:\n{}", self.log(name));
    }

    /// Stops every process (the PIDs in `pids`) once this test process is
    /// gone, then removes the directory.
    fn reap_after_test_process(&self) {
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.5; done; p=$(cat '{dir}/pids'); \
             kill $p 2>/dev/null; sleep 3; kill -9 $p 2>/dev/null; rm -rf '{dir}'",
            me = std::process::id(),
            dir = self.dir.display()
        );
        let reaper = Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the reaper");
        // It outlives this process by design.
        std::mem::forget(reaper);
    }

    /// Stops every process of this cluster now (by PID, as the reaper
    /// would) and removes its directory: for a bench that starts a fresh
    /// control plane per run.
    pub fn stop(self) {
        let pids = std::fs::read_to_string(self.dir.join("pids")).unwrap_or_default();
        let pids: Vec<&str> = pids.split_whitespace().collect();
        let _ = Command::new("kill")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline
            && pids.iter().any(|p| {
                // A stopped child of this process stays a zombie (Z).
                let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                !stat.is_empty() && !stat.contains(") Z ")
            })
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill")
            .arg("-9")
            .args(&pids)
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Stops the process `pid` with the cluster's own (a test's helper that
    /// must outlive no test process).
    pub fn adopt(&self, pid: u32) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("pids"))
            .unwrap();
        writeln!(f, "{pid}").unwrap();
    }

    /// Points deploy/'s webhook configurations at a controller serving on
    /// 127.0.0.1:`port`. kube-apiserver reaches a webhook Service through
    /// its ClusterIP, which nothing routes to here (no kube-proxy), so the
    /// Service `weft-webhook` becomes an ExternalName of localhost and the
    /// configurations name `port`: the apiserver then dials
    /// `https://localhost:PORT` and checks the certificate for the
    /// Service's DNS name, as in a cluster.
    pub fn route_webhooks(&self, port: u16) {
        let service = r#"{"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "weft-webhook", "namespace": "weft-system"},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}"#;
        self.kubectl_with_input(&["replace", "--force", "-f", "-"], service);
        let patch = format!(
            r#"[{{"op": "replace", "path": "/webhooks/0/clientConfig/service/port", "value": {port}}}]"#
        );
        for config in [
            "validatingwebhookconfiguration/weft-validating",
            "mutatingwebhookconfiguration/weft-pod-secrets",
        ] {
            let out = self.kubectl(&["patch", config, "--type=json", "-p", &patch]);
            assert!(
                out.status.success(),
                "{config}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// Starts kwok managing `nodes` simulated Nodes (`kwok-node-<i>`):
    /// pods bound to them turn Running, then Succeeded after `run_ms`
    /// (exit code 0, for any owner), as kwok's own fast stages do.
    pub fn start_kwok(&mut self, nodes: usize, run_ms: u64) {
        let stages = self.bin.join("kwok-stages");
        let mut config = String::from(
            "kind: KwokConfiguration\napiVersion: config.kwok.x-k8s.io/v1alpha1\noptions:\n  podPlayStageParallelism: 16\n  nodePlayStageParallelism: 4\n",
        );
        for f in ["node-initialize", "pod-ready", "pod-delete"] {
            config.push_str("---\n");
            config.push_str(&std::fs::read_to_string(stages.join(format!("{f}.yaml"))).unwrap());
        }
        config.push_str(&KWOK_COMPLETE.replace("RUN_MS", &run_ms.to_string()));
        let file = self.dir.join("kwok.yaml");
        std::fs::write(&file, config).unwrap();
        let kc = self.kubeconfig.display().to_string();
        self.spawn(
            "kwok",
            &[
                format!("--kubeconfig={kc}"),
                format!("--config={}", file.display()),
                "--manage-all-nodes=false".into(),
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
                "--cidr=10.244.0.0/16".into(),
            ],
        );
        for i in 0..nodes {
            let node = format!(
                r#"{{"apiVersion": "v1", "kind": "Node", "metadata": {{"name": "kwok-node-{i}",
                "annotations": {{"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
                "labels": {{"kubernetes.io/hostname": "kwok-node-{i}", "type": "kwok"}}}}}}"#
            );
            self.kubectl_with_input(&["apply", "-f", "-"], &node);
        }
        self.wait("kwok", 60, || {
            let out = self.kubectl(&[
                "wait",
                "--for=condition=Ready",
                "node",
                "-l",
                "type=kwok",
                "--timeout=1s",
            ]);
            out.status.success()
        });
    }

    /// A component's log.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// kubectl as the admin (blocking).
    pub fn kubectl(&self, args: &[&str]) -> std::process::Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .expect("run kubectl")
    }

    /// kubectl as the admin with `input` on its stdin; it must succeed.
    pub fn kubectl_with_input(&self, args: &[&str], input: &str) {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "kubectl {args:?}");
    }

    /// A kube-rs client as the admin.
    pub async fn client(&self) -> kube::Client {
        client_for(&self.kubeconfig).await
    }

    /// Issues a serving certificate (for a node agent on 127.0.0.1) signed
    /// by the cluster's CA, which kube-apiserver checks when it proxies
    /// `kubectl logs` to the node.
    pub fn serving_cert(&self, name: &str) -> (PathBuf, PathBuf) {
        self.pki.issue(name, name, &[], &["localhost", "127.0.0.1"])
    }

    /// A client certificate for `user` in `group`, and a kubeconfig for it.
    pub fn kubeconfig_as(&self, user: &str, group: Option<&str>) -> PathBuf {
        let file = format!("user-{}", user.replace(':', "-"));
        let (crt, key) = self.pki.issue(&file, user, group.as_slice(), &[]);
        // KUBECONFIG is a list split at ':', which user names hold.
        let path = self
            .dir
            .join(format!("{}.kubeconfig", user.replace(':', "-")));
        std::fs::write(&path, kubeconfig_text(&self.server, &self.ca, &crt, &key)).unwrap();
        path
    }

    /// A kubeconfig that authenticates with a bearer `token` (a
    /// ServiceAccount's, from the TokenRequest API).
    pub fn kubeconfig_with_token(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.join(format!("{name}.token.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: real\n  context: {{cluster: real, user: {name}, namespace: default}}\ncurrent-context: real\n",
            self.server,
            self.ca.display()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Creates namespace `ns` and writes to `path` an admin kubeconfig
    /// whose context names it, so kubectl and `weft` without `-n` use it:
    /// the tests of a file share the cluster, each in its own namespace.
    pub fn namespace(&self, ns: &str, path: &Path) {
        let out = self.kubectl(&["create", "namespace", ns]);
        assert!(
            out.status.success(),
            "kubectl create namespace {ns}: {out:?}"
        );
        let mut kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        for c in &mut kc.contexts {
            if let Some(context) = c.context.as_mut() {
                context.namespace = Some(ns.to_string());
            }
        }
        std::fs::write(path, serde_yaml::to_string(&kc).unwrap()).unwrap();
    }

    /// Compacts etcd's history up to its current revision (physically), as
    /// kube-apiserver does every 5 minutes: a watch from an older
    /// resourceVersion is then answered 410 Gone. Through etcd's gRPC
    /// gateway.
    pub fn compact_etcd(&self) {
        let range = http_post(self.etcd_port, "/v3/kv/range", r#"{"key": "AA=="}"#);
        let v: serde_json::Value = serde_json::from_str(&range).expect(&range);
        let rev = v["header"]["revision"].as_str().expect(&range).to_string();
        let body = format!(r#"{{"revision": "{rev}", "physical": true}}"#);
        let out = http_post(self.etcd_port, "/v3/kv/compaction", &body);
        assert!(out.contains("header"), "etcd compaction to {rev}: {out}");
    }

    /// A kubeconfig (file `name`) with a token of ServiceAccount
    /// `weft-system/weft-controller`, deploy/'s, from the TokenRequest API.
    pub fn controller_kubeconfig(&self, name: &str) -> PathBuf {
        let out = self.kubectl(&[
            "create",
            "token",
            "weft-controller",
            "-n",
            "weft-system",
            "--duration=2h",
        ]);
        assert!(out.status.success(), "kubectl create token: {out:?}");
        let token = String::from_utf8(out.stdout).unwrap();
        self.kubeconfig_with_token(name, token.trim())
    }

    /// The audit log's events (JSON lines), as kube-apiserver wrote them.
    pub fn audit(&self) -> Vec<serde_json::Value> {
        let mut all = Vec::new();
        self.each_audit(|e| all.push(e));
        all
    }

    /// Calls `f` on each event of the audit log, oldest first, one line at
    /// a time (a 100,000-pod run writes gigabytes), across the files
    /// kube-apiserver rotated: `--audit-log-maxsize=0` is its logger's
    /// default of 100 MB, not "never", and a rotated file is
    /// `audit-<time>.log` beside `audit.log` (so the names sort in time
    /// order: '-' before '.').
    pub fn each_audit(&self, mut f: impl FnMut(serde_json::Value)) {
        use std::io::BufRead;
        let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                name.starts_with("audit") && name.ends_with(".log")
            })
            .collect();
        files.sort();
        for file in files {
            let Ok(file) = std::fs::File::open(&file) else {
                continue;
            };
            for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
                if let Ok(e) = serde_json::from_str(&line) {
                    f(e);
                }
            }
        }
    }
}

impl RealCluster {
    /// The allowed requests of the audit log as the dev cluster records
    /// them ([`weft_cluster::AuditRecord`]): the impersonated user as
    /// `user`, the one who impersonated as `impersonator`.
    pub fn audit_records(&self) -> Vec<weft_cluster::AuditRecord> {
        let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
        self.audit()
            .iter()
            .filter(|e| e["stage"] == "ResponseComplete" || e["stage"] == "ResponseStarted")
            .filter(|e| {
                e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| c < 400)
            })
            .filter(|e| e["objectRef"]["resource"].is_string())
            .map(|e| {
                let r = &e["objectRef"];
                let mut resource = text(&r["resource"]);
                if let Some(sub) = r["subresource"].as_str() {
                    resource = format!("{resource}/{sub}");
                }
                let impersonated = e["impersonatedUser"]["username"].as_str();
                weft_cluster::AuditRecord {
                    user: impersonated
                        .map(String::from)
                        .unwrap_or_else(|| text(&e["user"]["username"])),
                    verb: text(&e["verb"]),
                    api_group: text(&r["apiGroup"]),
                    resource,
                    namespace: text(&r["namespace"]),
                    name: text(&r["name"]),
                    impersonator: impersonated.map(|_| text(&e["user"]["username"])),
                }
            })
            .collect()
    }
}

/// A kube-rs client from a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn kubeconfig_text(server: &str, ca: &Path, crt: &Path, key: &Path) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: real
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: admin
  user:
    client-certificate: {crt}
    client-key: {key}
contexts:
- name: real
  context: {{cluster: real, user: admin, namespace: default}}
current-context: real
",
        ca = ca.display(),
        crt = crt.display(),
        key = key.display()
    )
}

/// A plain-HTTP GET on loopback answered 200.
/// A plain-HTTP/1.0 request on loopback; the answer's body.
fn http_post(port: u16, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or(out)
}

fn http_ok(port: u16, path: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200")
}

/// A `weft node` process registered with a real cluster as the Node
/// `name`, with a node's credentials (`system:node:NAME` in `system:nodes`,
/// so the Node authorizer decides what it may do) and a serving
/// certificate of the cluster's CA. Killed when dropped.
pub struct NodeProcess {
    child: Child,
    /// The Node's name.
    pub name: String,
    log: PathBuf,
}

impl NodeProcess {
    /// Starts the node and waits until its Node is Ready.
    pub fn start(cluster: &RealCluster, name: &str) -> NodeProcess {
        let kubeconfig =
            cluster.kubeconfig_as(&format!("system:node:{name}"), Some("system:nodes"));
        let (crt, key) = cluster.serving_cert(&format!("node-{name}"));
        let log = cluster.dir.join(format!("node-{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["--log-format", "json", "node", "--node-name", name])
            .arg("--data-dir")
            .arg(cluster.dir.join(format!("node-{name}")))
            .args(["--listen", "127.0.0.1:0"])
            .arg("--tls-cert-file")
            .arg(&crt)
            .arg("--tls-private-key-file")
            .arg(&key)
            .arg("--client-ca-file")
            .arg(&cluster.ca)
            .env("KUBECONFIG", &kubeconfig)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start weft node");
        let mut node = NodeProcess {
            child,
            name: name.to_string(),
            log,
        };
        let ready = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
        for _ in 0..300 {
            let out = cluster.kubectl(&["get", "node", name, "-o", ready]);
            if String::from_utf8_lossy(&out.stdout) == "True" {
                return node;
            }
            if let Ok(Some(status)) = node.child.try_wait() {
                panic!("weft node {name} exited ({status}):\n{}", node.log());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("weft node {name} not Ready in 60 s:\n{}", node.log())
    }

    /// Its log (JSON lines).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
