//! RBAC and impersonation over HTTP, with kube-rs and the real `kubectl`:
//! a controller that may impersonate one plugin's ServiceAccount gets that
//! account's rights and no more, refused with kube-apiserver's 403.

mod common;

use std::path::Path;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use weft_cluster::{Authorization, DevCluster};

const SA: &str = "system:serviceaccount:default:weft-plugin-echo";
const CONTROLLER: &str = "system:serviceaccount:weft-system:weft-controller";

fn rbac(dir: &Path) -> weft_cluster::Config {
    api_only(dir).with_authorization(Authorization::Rbac)
}

/// A client sending `token` (none: the admin) and impersonating `as_user`.
async fn client_as(cluster: &DevCluster, token: Option<&str>, as_user: Option<&str>) -> Client {
    let yaml = token.map_or_else(|| cluster.kubeconfig(), |t| cluster.kubeconfig_as(t));
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = as_user.map(String::from);
    Client::try_from(config).unwrap()
}

/// Applies objects as the admin (kube-rs' untyped API, whatever their kind).
async fn apply_all(client: &Client, objects: &[Value]) {
    for obj in objects {
        let ar = kube::discovery::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            obj["kind"].as_str().unwrap(),
        ));
        let ns = obj["metadata"]["namespace"].as_str();
        let api: Api<kube::core::DynamicObject> = match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let obj: kube::core::DynamicObject = serde_json::from_value(obj.clone()).unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
    }
}

/// The plugin's Role (create/patch pods in `default`), and a controller
/// allowed to impersonate that ServiceAccount and nothing else.
async fn grant(client: &Client) {
    let role = |ns: &str, name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name, "namespace": ns}, "rules": rules})
    };
    let binding = |ns: &str, name: &str, subject: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name, "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [subject]})
    };
    apply_all(
        client,
        &[
            role(
                "default",
                "plugin-echo",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "patch"]}]),
            ),
            binding(
                "default",
                "plugin-echo",
                json!({"kind": "ServiceAccount", "name": "weft-plugin-echo"}),
            ),
            role(
                "default",
                "impersonate-echo",
                json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"],
                        "resourceNames": ["weft-plugin-echo"]}]),
            ),
            binding(
                "default",
                "impersonate-echo",
                json!({"kind": "ServiceAccount", "name": "weft-controller", "namespace": "weft-system"}),
            ),
        ],
    )
    .await;
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"]}]},
    }))
    .unwrap()
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
    )
    .unwrap()
}

#[tokio::test]
async fn impersonated_service_account_gets_its_role_and_no_more() {
    let t = start_with(rbac).await;
    grant(&t.client).await;
    let echo = client_as(&t.cluster, Some(CONTROLLER), Some(SA)).await;

    // (a) Granted: created, and audited as the ServiceAccount.
    let pods: Api<Pod> = Api::namespaced(echo.clone(), "default");
    pods.create(&PostParams::default(), &pod("p1"))
        .await
        .unwrap();
    let audit = t.cluster.audit();
    let rec = audit
        .iter()
        .find(|r| r.verb == "create" && r.resource == "pods" && r.name.is_empty())
        .expect("the create is audited");
    assert_eq!(rec.user, SA);
    assert_eq!(rec.impersonator.as_deref(), Some(CONTROLLER));

    // (b) Not granted: 403 naming the account, the resource and the namespace.
    let cms: Api<ConfigMap> = Api::namespaced(echo.clone(), "default");
    let s = status_of(cms.create(&PostParams::default(), &config_map("c")).await);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        format!(
            "configmaps is forbidden: User \"{SA}\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )
    );
    assert!(
        !t.cluster.audit().iter().any(|r| r.resource == "configmaps"),
        "refused requests are not audited"
    );

    // Verbs and subresources the Role leaves out.
    let s = status_of(pods.list(&ListParams::default()).await);
    assert!(
        s.message.contains("cannot list resource \"pods\""),
        "{}",
        s.message
    );
    let s = status_of(pods.get("p1").await);
    assert_eq!(
        s.message,
        format!(
            "pods \"p1\" is forbidden: User \"{SA}\" cannot get resource \"pods\" in API group \"\" in the namespace \"default\""
        )
    );
    let patch = Patch::Merge(json!({"status": {"phase": "Running"}}));
    let s = status_of(
        pods.patch_status("p1", &PatchParams::default(), &patch)
            .await,
    );
    assert!(
        s.message.contains("cannot patch resource \"pods/status\""),
        "{}",
        s.message
    );
    let labels = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    pods.patch("p1", &PatchParams::default(), &labels)
        .await
        .unwrap();
    let s = status_of(
        Api::<Pod>::namespaced(echo, "other")
            .create(&PostParams::default(), &pod("p"))
            .await,
    );
    assert!(
        s.message.ends_with("in the namespace \"other\""),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn impersonating_anyone_else_is_refused() {
    let t = start_with(rbac).await;
    grant(&t.client).await;

    // (c) Another account, a user, a group: each needs its own grant.
    let other = client_as(
        &t.cluster,
        Some(CONTROLLER),
        Some("system:serviceaccount:default:weft-plugin-other"),
    )
    .await;
    let s = status_of(
        Api::<Pod>::namespaced(other, "default")
            .create(&PostParams::default(), &pod("p"))
            .await,
    );
    assert_eq!(
        s.message,
        format!(
            "serviceaccounts \"weft-plugin-other\" is forbidden: User \"{CONTROLLER}\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"default\""
        )
    );
    let details = s.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("weft-plugin-other", "serviceaccounts")
    );

    let alice = client_as(&t.cluster, Some(CONTROLLER), Some("alice")).await;
    let s = status_of(
        Api::<Pod>::namespaced(alice, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        s.message,
        format!(
            "users \"alice\" is forbidden: User \"{CONTROLLER}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        )
    );

    let yaml = t.cluster.kubeconfig_as(CONTROLLER);
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    config.auth_info.impersonate = Some(SA.into());
    config.auth_info.impersonate_groups = Some(vec!["system:masters".into()]);
    let masters = Client::try_from(config).unwrap();
    let s = status_of(
        Api::<Pod>::namespaced(masters, "default")
            .list(&ListParams::default())
            .await,
    );
    assert!(
        s.message
            .starts_with("groups \"system:masters\" is forbidden:"),
        "{}",
        s.message
    );

    // A user with no impersonation rights at all.
    let plugin = client_as(&t.cluster, Some(SA), Some(CONTROLLER)).await;
    let s = status_of(
        Api::<Pod>::namespaced(plugin, "default")
            .list(&ListParams::default())
            .await,
    );
    assert!(
        s.message
            .contains(&format!("User \"{SA}\" cannot impersonate")),
        "{}",
        s.message
    );

    // The admin may impersonate anyone.
    let as_echo = client_as(&t.cluster, None, Some(SA)).await;
    Api::<Pod>::namespaced(as_echo, "default")
        .create(&PostParams::default(), &pod("by-admin"))
        .await
        .unwrap();
    let rec = t
        .cluster
        .audit()
        .into_iter()
        .find(|r| r.verb == "create" && r.resource == "pods")
        .unwrap();
    assert_eq!(
        (rec.user.as_str(), rec.impersonator.as_deref()),
        (SA, Some("system:admin"))
    );
}

#[tokio::test]
async fn users_without_bindings_get_403_and_the_admin_everything() {
    let t = start_with(rbac).await;
    // (d) A token user with no binding.
    let nobody = client_as(&t.cluster, Some("nobody"), None).await;
    let s = status_of(
        Api::<Pod>::namespaced(nobody.clone(), "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        s.message,
        "pods is forbidden: User \"nobody\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    let s = status_of(
        Api::<k8s_openapi::api::core::v1::Namespace>::all(nobody.clone())
            .get("default")
            .await,
    );
    assert_eq!(
        s.message,
        "namespaces \"default\" is forbidden: User \"nobody\" cannot get resource \"namespaces\" in API group \"\" in the namespace \"default\""
    );
    let s = status_of(
        Api::<k8s_openapi::api::core::v1::Node>::all(nobody.clone())
            .list(&ListParams::default())
            .await,
    );
    assert!(
        s.message
            .ends_with("cannot list resource \"nodes\" in API group \"\" at the cluster scope"),
        "{}",
        s.message
    );
    // Discovery and /version are open to every authenticated user; other
    // paths are not.
    nobody.apiserver_version().await.unwrap();
    nobody.list_api_groups().await.unwrap();
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let s = status_of(nobody.request_text(req).await);
    assert_eq!(
        s.message,
        "forbidden: User \"nobody\" cannot get path \"/metrics\""
    );

    // A binding to a role that does not exist says so.
    apply_all(
        &t.client,
        &[json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                 "metadata": {"name": "dangling", "namespace": "default"},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "missing"},
                 "subjects": [{"kind": "User", "name": "nobody"}]})],
    )
    .await;
    let s = status_of(
        Api::<Pod>::namespaced(nobody, "default")
            .list(&ListParams::default())
            .await,
    );
    assert!(
        s.message
            .ends_with(": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"),
        "{}",
        s.message
    );

    // The admin (no token) does everything.
    let cms: Api<ConfigMap> = Api::namespaced(t.client.clone(), "default");
    cms.create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    cms.delete("c", &Default::default()).await.unwrap();
    Api::<k8s_openapi::api::core::v1::Node>::all(t.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        t.cluster
            .audit()
            .iter()
            .any(|r| r.user == "system:admin" && r.verb == "delete")
    );
}

#[tokio::test]
async fn cluster_roles_groups_and_create_on_apply() {
    let t = start_with(rbac).await;
    apply_all(
        &t.client,
        &[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "cm-patcher"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "cm-patcher"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-patcher"},
                   "subjects": [{"kind": "Group", "name": "system:serviceaccounts:tools"}]}),
        ],
    )
    .await;
    let tool = client_as(&t.cluster, Some("system:serviceaccount:tools:fixer"), None).await;
    let cms: Api<ConfigMap> = Api::namespaced(tool, "default");
    let apply = PatchParams::apply("fixer");
    let body = Patch::Apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                   "data": {"k": "v"}}),
    );
    // Creating by apply needs `create` too, worded as kube-apiserver words
    // it (the authorizer's reason only, which RBAC leaves empty).
    let s = status_of(cms.patch("c", &apply, &body).await);
    assert_eq!(
        (s.code, s.message.as_str()),
        (403, "configmaps \"c\" is forbidden: ")
    );
    Api::<ConfigMap>::namespaced(t.client.clone(), "default")
        .create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    cms.patch("c", &apply, &body).await.unwrap();
    assert_eq!(cms.get("c").await.unwrap().data.unwrap()["k"], "v");
}

#[tokio::test]
async fn always_allow_refuses_nothing_but_audits_impersonation() {
    // (e) The default mode: no RBAC objects, nothing refused.
    let t = start().await;
    let echo = client_as(&t.cluster, Some(CONTROLLER), Some(SA)).await;
    Api::<ConfigMap>::namespaced(echo, "default")
        .create(&PostParams::default(), &config_map("c"))
        .await
        .unwrap();
    let nobody = client_as(&t.cluster, Some("nobody"), None).await;
    Api::<Pod>::namespaced(nobody, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let audit = t.cluster.audit();
    let rec = audit.iter().find(|r| r.resource == "configmaps").unwrap();
    assert_eq!(
        (rec.user.as_str(), rec.impersonator.as_deref()),
        (SA, Some(CONTROLLER))
    );
    let rec = audit.iter().find(|r| r.user == "nobody").unwrap();
    assert_eq!(
        (rec.verb.as_str(), rec.impersonator.as_deref()),
        ("list", None)
    );
    // Without a token, the user is still system:anonymous.
    Api::<Pod>::namespaced(t.client.clone(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(t.cluster.audit().last().unwrap().user, "system:anonymous");
}

/// Runs kubectl with `kubeconfig`; (success, stdout, stderr). `None` when
/// kubectl is not installed.
fn kubectl(dir: &Path, kubeconfig: &Path, args: &[&str]) -> Option<(bool, String, String)> {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("kube-cache"))
        .args(args)
        .output()
        .ok()?;
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// kubectl, like every client-go program, reads a kubeconfig's credentials
/// only for an `https://` server, so against the dev cluster it always
/// sends no token and is the admin; `--as` is how it acts as anyone else
/// (the admin may impersonate anyone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_a_service_account() {
    let t = start_with(rbac).await;
    grant(&t.client).await;
    let dir = t.dir.path().to_path_buf();
    let kubeconfig = dir.join("kubeconfig");
    t.cluster.write_kubeconfig(&kubeconfig).unwrap();
    let pod_yaml = dir.join("pod.yaml");
    std::fs::write(
        &pod_yaml,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hello\nspec:\n  containers:\n  - name: main\n    image: busybox\n    command: [\"true\"]\n",
    )
    .unwrap();
    let pod_file = pod_yaml.display().to_string();
    let run = |args: &[&str]| {
        let (dir, kubeconfig) = (dir.clone(), kubeconfig.clone());
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(&dir, &kubeconfig, &args)
        })
    };
    let Some((ok, out, err)) = run(&["--as", SA, "create", "-f", &pod_file]).await.unwrap() else {
        eprintln!("SKIPPED: kubectl is not on PATH");
        return;
    };
    assert!(ok && out.contains("pod/hello created"), "{out}\n{err}");
    let audit = t.cluster.audit();
    let rec = audit
        .iter()
        .find(|r| r.verb == "create" && r.resource == "pods")
        .unwrap();
    assert_eq!(
        (rec.user.as_str(), rec.impersonator.as_deref()),
        (SA, Some("system:admin"))
    );

    let (ok, _, err) = run(&["--as", SA, "create", "configmap", "c"])
        .await
        .unwrap()
        .unwrap();
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "configmaps is forbidden: User \"{SA}\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
        )),
        "{err}"
    );
    let (ok, _, err) = run(&["--as", SA, "get", "pods"]).await.unwrap().unwrap();
    assert!(!ok);
    assert!(
        err.contains(&format!("Error from server (Forbidden): pods is forbidden: User \"{SA}\" cannot list resource \"pods\"")),
        "{err}"
    );
    let (ok, _, err) = run(&["--as", "nobody", "get", "configmaps"])
        .await
        .unwrap()
        .unwrap();
    assert!(!ok);
    assert!(
        err.contains("User \"nobody\" cannot list resource \"configmaps\""),
        "{err}"
    );
    // `--as-group system:masters` is the admin again.
    let (ok, out, err) = run(&[
        "--as",
        "nobody",
        "--as-group",
        "system:masters",
        "get",
        "pods",
        "-o",
        "name",
    ])
    .await
    .unwrap()
    .unwrap();
    assert!(ok && out.contains("pod/hello"), "{out}\n{err}");
    // Without --as, kubectl is the admin.
    let (ok, _, err) = run(&["delete", "pod", "hello", "--wait=false"])
        .await
        .unwrap()
        .unwrap();
    assert!(ok, "{err}");
}
