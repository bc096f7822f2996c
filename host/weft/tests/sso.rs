//! Single sign-on and the cluster's RBAC (issue 45), with the real `weft
//! controller` binary serving the admin API on the dev cluster (RBAC on) or
//! the real control plane (`WEFT_TEST_CLUSTER=k8s`), and a real OpenID
//! Connect provider (npm's oidc-provider, `common::oidc`). People sign in
//! with `weft login` (loopback redirect or device flow) as they would; the
//! provider's pages are driven over HTTP. RoleBindings decide, and
//! `kubectl auth can-i` must predict every answer.

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::cluster::Bed;
use common::oidc::{ALICE, BOB, CAROL, CONSOLE_SECRET, Person, Provider};
use common::{ControllerProcess, free_port, kubectl};
use tokio::io::AsyncBufReadExt as _;
use weft::admin::pb;

/// How long the admin API reuses an RBAC decision in these tests.
const CACHE_SECONDS: u64 = 2;

/// One test's world: the bed, the provider, a controller serving the
/// admin API with OIDC, TokenReviews and RBAC on.
struct World {
    bed: Bed,
    provider: Provider,
    controller: ControllerProcess,
    admin: String,
    admin_port: u16,
}

impl World {
    async fn start(identity: &str) -> World {
        Self::start_with_ttl(identity, 3600).await
    }

    /// A world whose provider issues ID tokens valid for `id_token_secs`.
    async fn start_with_ttl(identity: &str, id_token_secs: u64) -> World {
        let bed = Bed::start_rbac().await;
        let (admin_port, oidc_port) = (free_port(), free_port());
        let secret = bed.path("console-secret");
        std::fs::write(&secret, CONSOLE_SECRET).unwrap();
        let config = format!(
            "listen: 127.0.0.1:{admin_port}
middleware: [request-id, auth-token, audit]
authentication:
  oidc:
    issuerUrl: http://127.0.0.1:{oidc_port}
    clientId: weft-console
    clientSecretFile: {}
    cliClientId: weft-cli
    usernameClaim: email
  tokenReview: true
authorization:
  kubernetes: {{cacheSeconds: {CACHE_SECONDS}}}
  principals: {{ci-bot: [{}]}}
",
            secret.display(),
            bed.ns
        );
        let path = bed.path("admin.yaml");
        std::fs::write(&path, config).unwrap();
        let registry = bed.path("registry.json");
        let plugins = serde_json::json!({"plugins": {"auth-token": {"config": {"tokens": {"ci-bot-token": "ci-bot"}}}}});
        std::fs::write(&registry, plugins.to_string()).unwrap();
        let args = [
            "--admin-config",
            path.to_str().unwrap(),
            "--registry-config",
            registry.to_str().unwrap(),
        ];
        let controller = bed.controller(identity, &args);
        let provider =
            Provider::start_with_ttl(bed.dir.path(), oidc_port, admin_port, id_token_secs).await;
        common::admin_client(admin_port).await;
        World {
            admin: format!("http://127.0.0.1:{admin_port}"),
            bed,
            provider,
            controller,
            admin_port,
        }
    }

    /// `weft ARGS` as the person whose config directory is `home`.
    async fn weft(&self, home: &Path, args: &[&str]) -> std::process::Output {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .env("XDG_CONFIG_HOME", home)
            .env("WEFT_ADMIN", &self.admin)
            .env("KUBECONFIG", self.bed.path("no-kubeconfig"))
            .output()
            .await
            .unwrap()
    }

    /// `weft login` (loopback redirect) as `who`, the browser's part done
    /// over HTTP; answers the config directory holding the sign-in.
    async fn login(&self, who: (&str, &str)) -> PathBuf {
        let home = self.bed.path(&format!("{}-config", who.0));
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["login", "--admin", &self.admin])
            .env("XDG_CONFIG_HOME", &home)
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("weft login printed no URL");
            if line.starts_with("http") {
                break line;
            }
        };
        let back = Person::default()
            .sign_in(&self.provider.issuer, &url, who)
            .await;
        assert!(back.starts_with("http://127.0.0.1:"), "{back}");
        let page = reqwest::get(&back).await.unwrap().text().await.unwrap();
        assert!(page.contains("Signed in"), "{page}");
        let mut rest = String::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            rest += &line;
        }
        assert!(child.wait().await.unwrap().success(), "weft login: {rest}");
        assert!(
            rest.contains(&format!("as {}@example.com", who.0)),
            "{rest}"
        );
        home
    }

    /// The ID token `weft login` kept in `home`.
    fn id_token(home: &Path, admin: &str) -> String {
        Self::credentials(home, admin)["idToken"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The sign-in `weft login` kept in `home` for `admin`.
    fn credentials(home: &Path, admin: &str) -> serde_json::Value {
        let file = home.join("weft/credentials.json");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        v["admins"][admin].clone()
    }

    /// `weft submit --via-admin -n NS FILE` as the person of `home`.
    async fn submit(&self, home: &Path, ns: &str, file: &str) -> std::process::Output {
        self.weft(home, &["submit", "--via-admin", "-n", ns, file])
            .await
    }

    async fn stop(self) {
        drop(self.controller);
        drop(self.provider);
        self.bed.stop().await;
    }
}

/// A Role for running workflows in `ns`, bound to `subject` (`Group:x`,
/// `User:x` or `ServiceAccount:x`).
async fn grant(bed: &Bed, ns: &str, binding: &str, subject: &str) {
    let (kind, name) = subject.split_once(':').unwrap();
    let yaml = format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: workflow-runner, namespace: {ns}}}
rules:
- apiGroups: [weft.dev]
  resources: [workflows]
  verbs: [get, list, watch, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {binding}, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: workflow-runner}}
subjects:
- {{kind: {kind}, name: \"{name}\", namespace: {ns}, apiGroup: \"{}\"}}
",
        if kind == "ServiceAccount" {
            ""
        } else {
            "rbac.authorization.k8s.io"
        }
    );
    let out = kubectl(&bed.kubeconfig, &["apply", "-f", "-"], Some(&yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `kubectl auth can-i VERB workflows.weft.dev -n NS --as USER` says.
async fn can_i(bed: &Bed, verb: &str, ns: &str, user: &str, group: &str) -> bool {
    let out = kubectl(
        &bed.kubeconfig,
        &[
            "auth",
            "can-i",
            verb,
            "workflows.weft.dev",
            "-n",
            ns,
            "--as",
            user,
            "--as-group",
            group,
        ],
        None,
    )
    .await;
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

fn workflow_file(dir: &Path) -> PathBuf {
    let path = dir.join("hello.yaml");
    let yaml = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {generateName: hello-}
spec:
  nodes:
    - id: hello
      task: {type: pod, config: {image: busybox, command: [sh, -c, 'echo hello']}}
";
    std::fs::write(&path, yaml).unwrap();
    path
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn alice_signs_in_runs_in_her_namespace_and_a_rolebinding_opens_another() {
    let w = World::start("sso-0").await;
    let (ns_a, ns_b) = (w.bed.ns.clone(), w.bed.namespace_beside("b").await);
    grant(&w.bed, &ns_a, "team-a-runs", "Group:team-a").await;

    let home = w.login(ALICE).await;
    let creds = home.join("weft/credentials.json");
    let mode = std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{} is readable by others", creds.display());

    // Her namespace: submitted through the admin API as alice, run, and
    // watched to its end through the admin API.
    let file = workflow_file(w.bed.dir.path());
    let file = file.to_str().unwrap();
    let out = w.submit(&home, &ns_a, file).await;
    assert!(out.status.success(), "{}", text(&out));
    let name = text(&out)
        .split("workflow.weft.dev/")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let wf: kube::Api<weft::api::Workflow> = kube::Api::namespaced(w.bed.client.clone(), &ns_a);
    let created = wf.get(&name).await.unwrap();
    assert_eq!(
        created.metadata.annotations.unwrap()["weft.dev/created-by"],
        "alice@example.com"
    );
    let token = World::id_token(&home, &w.admin);
    let phase = watch_to_end(w.admin_port, &token, &ns_a, &name).await;
    assert_eq!(phase, "Succeeded");

    // team-b: refused, naming her, the verb and the namespace; kubectl agrees.
    assert!(!can_i(&w.bed, "create", &ns_b, "alice@example.com", "team-a").await);
    let out = w.submit(&home, &ns_b, file).await;
    assert!(!out.status.success());
    let refusal = text(&out);
    for word in ["alice@example.com", "create", "workflows.weft.dev", &ns_b] {
        assert!(refusal.contains(word), "{word} missing from: {refusal}");
    }

    // A RoleBinding for her in team-b: allowed within the cache's lifetime.
    grant(&w.bed, &ns_b, "alice-runs", "User:alice@example.com").await;
    assert!(can_i(&w.bed, "create", &ns_b, "alice@example.com", "team-a").await);
    let granted = Instant::now();
    loop {
        let out = w.submit(&home, &ns_b, file).await;
        if out.status.success() {
            break;
        }
        assert!(
            granted.elapsed() < Duration::from_secs(CACHE_SECONDS + 8),
            "still refused {:?} after the RoleBinding: {}",
            granted.elapsed(),
            text(&out)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // The audit names the user, her groups, who vouched and the decision.
    let log = w.controller.log();
    let refused_line = log
        .lines()
        .find(|l| l.contains("outcome=PERMISSION_DENIED") && l.contains("alice@example.com"))
        .unwrap_or_else(|| panic!("no audit line of the refusal in: {log}"));
    for part in ["groups=team-a", "authenticated_by=oidc", "decision="] {
        assert!(
            refused_line.contains(part),
            "{part} missing: {refused_line}"
        );
    }

    // Signed out: the CLI sends nothing, and the admin API asks for a sign-in.
    let out = w.weft(&home, &["logout"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let out = w.submit(&home, &ns_a, file).await;
    assert!(
        text(&out).contains("sign in with weft login"),
        "{}",
        text(&out)
    );
    w.stop().await;
}

/// Follows WatchExecution as the bearer of `token` to a terminal phase.
async fn watch_to_end(port: u16, token: &str, ns: &str, name: &str) -> String {
    let mut client = common::admin_client(port).await;
    let mut req = tonic::Request::new(pb::WatchExecutionRequest {
        id: Some(pb::ExecutionId {
            namespace: ns.into(),
            name: name.into(),
            ..Default::default()
        }),
    });
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let mut stream = client.watch_execution(req).await.unwrap().into_inner();
    let deadline = Instant::now() + Duration::from_secs(120);
    while let Ok(Some(e)) = tokio::time::timeout_at(deadline.into(), stream.message())
        .await
        .unwrap()
    {
        if matches!(e.phase.as_str(), "Succeeded" | "Failed" | "Aborted") {
            return e.phase;
        }
    }
    panic!("{ns}/{name} did not finish");
}

#[tokio::test(flavor = "multi_thread")]
async fn bob_signs_in_with_the_device_flow_and_sees_only_his_namespace() {
    let w = World::start("sso-1").await;
    let ns_b = w.bed.namespace_beside("b").await;
    grant(&w.bed, &ns_b, "team-b-runs", "Group:team-b").await;
    let home = w.bed.path("bob-config");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["login", "--device", "--admin", &w.admin])
        .env("XDG_CONFIG_HOME", &home)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let code = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("no user code printed");
        if let Some(code) = line.strip_prefix("and enter the code ") {
            break code.trim().to_string();
        }
    };
    Person::default()
        .confirm_device(&w.provider.issuer, &code, BOB)
        .await;
    let mut rest = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        rest += &line;
    }
    assert!(
        child.wait().await.unwrap().success(),
        "weft login --device: {rest}"
    );
    assert!(
        rest.contains("as bob@example.com (groups: team-b)"),
        "{rest}"
    );

    // ListNamespaces: exactly the namespaces bob may list workflows in.
    let token = World::id_token(&home, &w.admin);
    let mut client = common::admin_client(w.admin_port).await;
    let mut req = tonic::Request::new(pb::ListNamespacesRequest {});
    req.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let namespaces = client.list_namespaces(req).await.unwrap().into_inner();
    assert_eq!(namespaces.namespaces, vec![ns_b.clone()]);
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn machines_use_service_account_and_static_tokens_through_the_same_authorization() {
    let w = World::start("sso-2").await;
    let ns = w.bed.ns.clone();
    let sa = format!("system:serviceaccount:{ns}:robot");
    let out = kubectl(
        &w.bed.kubeconfig,
        &["create", "serviceaccount", "robot", "-n", &ns],
        None,
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    grant(&w.bed, &ns, "robot-runs", "ServiceAccount:robot").await;
    let file = workflow_file(w.bed.dir.path());
    let file = file.to_str().unwrap();
    let home = w.bed.path("robot-config");
    let submit = |ns: String, token: String| {
        let (w, home) = (&w, home.clone());
        async move {
            w.weft(
                &home,
                &["submit", "--via-admin", "--token", &token, "-n", &ns, file],
            )
            .await
        }
    };
    let other = w.bed.namespace_beside("elsewhere").await;
    // Service-account tokens are JWTs the API server issued, reviewed by
    // it (the dev cluster's tokens are user names, not JWTs: there the
    // middleware sees them, so this part is the real control plane's).
    if common::cluster::real() {
        let out = kubectl(
            &w.bed.kubeconfig,
            &["create", "token", "robot", "-n", &ns],
            None,
        )
        .await;
        assert!(out.status.success(), "{}", text(&out));
        let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let out = submit(ns.clone(), token.clone()).await;
        assert!(out.status.success(), "{}", text(&out));
        let refusal = text(&submit(other.clone(), token.clone()).await);
        assert!(
            refusal.contains(&sa) && refusal.contains(&other),
            "{refusal}"
        );
        assert!(w.controller.log().contains("authenticated_by=token-review"));
    }

    // A static token of the auth-token middleware: the principals map
    // (the fallback for robots that are not Kubernetes users) decides.
    let out = submit(ns.clone(), "ci-bot-token".into()).await;
    assert!(out.status.success(), "{}", text(&out));
    let refusal = text(&submit(other, "ci-bot-token".into()).await);
    assert!(refusal.contains("ci-bot"), "{refusal}");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_signing_key_is_fetched_without_a_restart() {
    let w = World::start("sso-3").await;
    grant(&w.bed, &w.bed.ns, "team-a-runs", "Group:team-a").await;
    let home = w.login(ALICE).await;
    let list = |token: String| {
        let (port, ns) = (w.admin_port, w.bed.ns.clone());
        async move {
            let mut client = common::admin_client(port).await;
            let mut req = tonic::Request::new(pb::ListExecutionsRequest {
                namespace: ns,
                ..Default::default()
            });
            req.metadata_mut()
                .insert("authorization", format!("Bearer {token}").parse().unwrap());
            client.list_executions(req).await
        }
    };
    let old = World::id_token(&home, &w.admin);
    list(old.clone()).await.unwrap();

    let kid = w.provider.rotate().await;
    let home = w.login(ALICE).await;
    let new = World::id_token(&home, &w.admin);
    let header = jsonwebtoken::decode_header(&new).unwrap();
    assert_eq!(header.kid.as_deref(), Some(kid.as_str()));
    list(new)
        .await
        .unwrap_or_else(|s| panic!("the new key's token was refused: {s:?}"));
    // The old key is still published: its tokens still pass.
    list(old.clone()).await.unwrap();

    // A token whose signature does not match is refused.
    let mut forged = old.split('.').map(String::from).collect::<Vec<_>>();
    forged[2] = forged[2].chars().rev().collect();
    let refused = list(forged.join(".")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(w.provider.log().contains("/jwks"));
    w.stop().await;
}

/// A workflow waiting at an approval gate.
const GATED: &str = "apiVersion: weft.dev/v1alpha1
kind: Workflow
metadata: {name: gated}
spec:
  nodes:
    - id: ship-it
      gate: {approval: {message: 'ship it?'}}
    - id: deploy
      dependsOn: [ship-it]
      task: {type: pod, config: {image: busybox, command: [sh, -c, 'echo deployed']}}
";

#[tokio::test(flavor = "multi_thread")]
async fn the_console_signs_carol_in_through_the_provider_in_chromium() {
    use common::browser::{browser, find, scenario, text, until};
    let (w, b) = tokio::join!(World::start("sso-4"), browser());
    let ns = w.bed.ns.clone();
    let other = w.bed.namespace_beside("b").await;
    grant(&w.bed, &ns, "team-c-runs", "Group:team-c").await;
    let out = kubectl(
        &w.bed.kubeconfig,
        &["create", "-n", &ns, "-f", "-"],
        Some(GATED),
    )
    .await;
    assert!(out.status.success(), "{}", text_of(&out));
    // kubectl's view: she may list workflows in her namespace, not the other.
    assert!(can_i(&w.bed, "list", &ns, "carol@example.com", "team-c").await);
    assert!(!can_i(&w.bed, "list", &other, "carol@example.com", "team-c").await);
    let c = &b.c;
    scenario(c, "sso_console", async {
        // Any page: to the provider's login, and back signed in.
        c.goto(&format!("{}/", w.admin)).await?;
        find(c, "#login").await?.send_keys(CAROL.0).await?;
        find(c, "#password").await?.send_keys(CAROL.1).await?;
        find(c, "#submit").await?.click().await?;
        let user = text(c, "[data-testid=user]").await?;
        anyhow::ensure!(user == "carol@example.com", "signed in as {user:?}");
        // The session cookie is not readable by the page.
        let cookies = c.execute("return document.cookie;", vec![]).await?;
        anyhow::ensure!(!cookies.to_string().contains("weft_session"), "{cookies}");

        // The namespaces she may list, and only those.
        let picker = format!(
            "return [...document.querySelectorAll('[data-testid=namespace-picker] option')].filter(o => !o.disabled).map(o => o.value).join(',') === '{ns}';"
        );
        until(c, "the picker lists only her namespace", &picker).await?;

        // She may see the gate but not approve it: the server's words show.
        c.goto(&format!("{}/workflows/{ns}/gated/nodes/ship-it", w.admin)).await?;
        find(c, "[data-testid=gate-approve]").await?.click().await?;
        let banner = text(c, "[data-testid=error]").await?;
        for word in ["carol@example.com", "update", "workflows.weft.dev/approval", ns.as_str()] {
            anyhow::ensure!(banner.contains(word), "{word:?} missing from the banner: {banner}");
        }

        // Signing out: through the provider's logout page, back to a
        // console that does not sign her in again by itself.
        find(c, "[data-testid=sign-out]").await?.click().await?;
        find(c, "#logout").await?.click().await?;
        find(c, "[data-testid=sign-in]").await?;
        let me = c
            .execute_async(
                "const done = arguments[0]; fetch('/auth/me').then(r => done(r.status));",
                vec![],
            )
            .await?;
        anyhow::ensure!(me == 401, "/auth/me after signing out: {me}");
        Ok(())
    })
    .await;
    let log = w.controller.log();
    assert!(log.contains("console sign-in"), "{log}");
    b.c.clone().close().await.unwrap();
    w.stop().await;
}

fn text_of(o: &std::process::Output) -> String {
    text(o)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_refreshes_a_token_about_to_expire_and_keeps_the_new_pair() {
    // ID tokens of 30 s: the CLI refreshes any that expires within 60 s.
    let w = World::start_with_ttl("sso-5", 30).await;
    grant(&w.bed, &w.bed.ns, "team-a-runs", "Group:team-a").await;
    let home = w.login(ALICE).await;
    let read = || World::credentials(&home, &w.admin);
    let before = read();
    assert!(before["refreshToken"].is_string(), "{before}");
    let file = workflow_file(w.bed.dir.path());
    let out = w.submit(&home, &w.bed.ns, file.to_str().unwrap()).await;
    assert!(out.status.success(), "{}", text(&out));
    let after = read();
    assert_ne!(
        after["idToken"], before["idToken"],
        "the ID token was not refreshed"
    );
    // The provider rotates refresh tokens: the new one is kept (the old is void).
    assert_ne!(after["refreshToken"], before["refreshToken"]);
    let out = w.submit(&home, &w.bed.ns, file.to_str().unwrap()).await;
    assert!(out.status.success(), "a second refresh: {}", text(&out));
    w.stop().await;
}
