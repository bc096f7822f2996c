//! SubjectAccessReviews, TokenReviews and the self-subject reviews over
//! HTTP, asked as Weft's admin API asks them (kube-rs) and as a user asks
//! them (`kubectl auth can-i`, `kubectl auth whoami`): decided by the RBAC
//! that decides requests, named and refused as kube-apiserver names and
//! refuses them.

mod common;

use std::path::Path;

use common::*;
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview};
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SelfSubjectAccessReview, SelfSubjectRulesReview, SubjectAccessReview,
    SubjectAccessReviewStatus,
};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::discovery::ApiResource;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use weft_cluster::{Authorization, DevCluster};

const ADMIN_API: &str = "system:serviceaccount:weft-system:weft-admin-api";

fn rbac(dir: &Path) -> weft_cluster::Config {
    api_only(dir).with_authorization(Authorization::Rbac)
}

/// A client whose bearer token is `user` (the dev cluster's user name).
async fn client_as(cluster: &DevCluster, user: &str) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(&cluster.kubeconfig_as(user)).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

/// Creates objects of any kind as the admin.
async fn create_all(client: &Client, objects: &[Value]) {
    for obj in objects {
        let (group, version) = obj["apiVersion"]
            .as_str()
            .unwrap()
            .split_once('/')
            .unwrap_or(("", "v1"));
        let gvk = GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap());
        let ar = ApiResource::from_gvk(&gvk);
        let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let obj: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
    }
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name}, "rules": rules})
}

fn role_binding(ns: &str, name: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": name, "namespace": ns},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
           "subjects": subjects})
}

fn cluster_role_binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
           "subjects": subjects})
}

/// A review of `kind` with `spec`, typed as a client sends it.
fn review<K: DeserializeOwned>(group: &str, kind: &str, spec: Value) -> K {
    serde_json::from_value(json!({"apiVersion": format!("{group}/v1"), "kind": kind,
                                  "metadata": {}, "spec": spec}))
    .unwrap()
}

/// Asks a SubjectAccessReview as `client`.
async fn ask(client: &Client, spec: Value) -> Result<SubjectAccessReview, kube::Error> {
    let sar: SubjectAccessReview = review("authorization.k8s.io", "SubjectAccessReview", spec);
    Api::all(client.clone())
        .create(&PostParams::default(), &sar)
        .await
}

async fn status(client: &Client, spec: Value) -> SubjectAccessReviewStatus {
    ask(client, spec).await.unwrap().status.unwrap()
}

/// `verb` on `resource` (`workflows/approval` for a subresource) of
/// group weft.dev in `ns`, asked for alice of group team-a.
fn alice(verb: &str, resource: &str, ns: &str) -> Value {
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    json!({"user": "alice", "groups": ["team-a", "system:authenticated"],
           "resourceAttributes": {"namespace": ns, "verb": verb, "group": "weft.dev",
                                  "version": "v1alpha1", "resource": resource,
                                  "subresource": sub}})
}

/// Namespaces team-a and team-b; a Role in team-a creating workflows,
/// bound to alice; a ClusterRole reading logs, bound to alice.
async fn grant_alice(client: &Client) {
    let workflows = json!([
        {"apiGroups": ["weft.dev"], "resources": ["workflows"], "verbs": ["create"]},
        {"apiGroups": ["weft.dev"], "resources": ["workflows/approval"], "verbs": ["update"]},
        {"apiGroups": ["weft.dev"], "resources": ["workflows"], "verbs": ["approve"],
         "resourceNames": ["release"]},
    ]);
    create_all(
        client,
        &[
            namespace("team-a"),
            namespace("team-b"),
            role("team-a", "workflow-creator", workflows.clone()),
            role_binding(
                "team-a",
                "alice-workflows",
                "workflow-creator",
                json!([{"kind": "User", "name": "alice"}]),
            ),
            role("team-b", "workflow-creator", workflows),
            cluster_role(
                "log-reader",
                json!([{"nonResourceURLs": ["/logs", "/logs/*"], "verbs": ["get"]}]),
            ),
            cluster_role_binding(
                "alice-logs",
                "log-reader",
                json!([{"kind": "User", "name": "alice"}]),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn subject_access_reviews_decide_as_rbac_and_name_the_binding() {
    let t = start_with(rbac).await;
    grant_alice(&t.client).await;

    // Allowed in team-a, by the binding kube-apiserver would name.
    let s = status(&t.client, alice("create", "workflows", "team-a")).await;
    assert!(s.allowed);
    assert_eq!(
        s.reason.as_deref(),
        Some(
            r#"RBAC: allowed by RoleBinding "alice-workflows/team-a" of Role "workflow-creator" to User "alice""#
        )
    );
    assert_eq!(s.denied, None);
    assert_eq!(s.evaluation_error, None);
    // The answer is the posted review, with its status.
    let answer = ask(&t.client, alice("create", "workflows", "team-a"))
        .await
        .unwrap();
    assert_eq!(answer.spec.user.as_deref(), Some("alice"));
    assert_eq!(
        answer.spec.resource_attributes.unwrap().resource.as_deref(),
        Some("workflows")
    );

    // Denied in team-b, without a reason, as RBAC denies.
    let s = status(&t.client, alice("create", "workflows", "team-b")).await;
    assert!(!s.allowed);
    assert_eq!((s.reason, s.denied), (None, None));

    // A binding made now counts from the next review: a Group subject.
    create_all(
        &t.client,
        &[role_binding(
            "team-b",
            "team-a-workflows",
            "workflow-creator",
            json!([{"kind": "User", "name": "bob"}, {"kind": "Group", "name": "team-a"}]),
        )],
    )
    .await;
    let s = status(&t.client, alice("create", "workflows", "team-b")).await;
    assert!(s.allowed);
    assert_eq!(
        s.reason.as_deref(),
        Some(
            r#"RBAC: allowed by RoleBinding "team-a-workflows/team-b" of Role "workflow-creator" to Group "team-a""#
        )
    );
    // Groups alone are a subject too.
    let s = status(
        &t.client,
        json!({"groups": ["team-a"],
               "resourceAttributes": {"namespace": "team-b", "verb": "create",
                                      "group": "weft.dev", "resource": "workflows"}}),
    )
    .await;
    assert!(s.allowed, "{s:?}");

    // Custom verbs and made-up subresources are strings to RBAC.
    assert!(
        status(&t.client, alice("update", "workflows/approval", "team-a"))
            .await
            .allowed
    );
    assert!(
        !status(&t.client, alice("update", "workflows", "team-a"))
            .await
            .allowed
    );
    assert!(
        !status(&t.client, alice("patch", "workflows/approval", "team-a"))
            .await
            .allowed
    );
    let mut approve = alice("approve", "workflows", "team-a");
    assert!(!status(&t.client, approve.clone()).await.allowed);
    approve["resourceAttributes"]["name"] = "release".into();
    assert!(status(&t.client, approve).await.allowed);

    // Non-resource URLs, granted and by the built-in discovery grant.
    let url = |user: &str, groups: Value, verb: &str, path: &str| {
        json!({"user": user, "groups": groups,
               "nonResourceAttributes": {"verb": verb, "path": path}})
    };
    let s = status(
        &t.client,
        url("alice", json!([]), "get", "/logs/kubelet.log"),
    )
    .await;
    assert!(s.allowed);
    assert_eq!(
        s.reason.as_deref(),
        Some(
            r#"RBAC: allowed by ClusterRoleBinding "alice-logs" of ClusterRole "log-reader" to User "alice""#
        )
    );
    assert!(
        !status(&t.client, url("alice", json!([]), "post", "/logs"))
            .await
            .allowed
    );
    assert!(
        !status(&t.client, url("alice", json!([]), "get", "/metrics"))
            .await
            .allowed
    );
    let s = status(
        &t.client,
        url("carol", json!(["system:authenticated"]), "get", "/version"),
    )
    .await;
    assert_eq!(
        s.reason.as_deref(),
        Some(
            r#"RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated""#
        )
    );
    // Without system:authenticated in the review, not even discovery.
    assert!(
        !status(&t.client, url("carol", json!([]), "get", "/version"))
            .await
            .allowed
    );

    // system:masters may do anything, before RBAC is asked (no reason).
    let s = status(
        &t.client,
        json!({"user": "root", "groups": ["system:masters"],
               "resourceAttributes": {"verb": "delete", "resource": "nodes"}}),
    )
    .await;
    assert_eq!((s.allowed, s.reason), (true, None));

    // A binding to a missing role gives RBAC's reason.
    create_all(
        &t.client,
        &[role_binding(
            "team-b",
            "dangling",
            "missing",
            json!([{"kind": "User", "name": "dave"}]),
        )],
    )
    .await;
    let s = status(
        &t.client,
        json!({"user": "dave",
               "resourceAttributes": {"namespace": "team-b", "verb": "get", "resource": "pods"}}),
    )
    .await;
    assert!(!s.allowed);
    assert_eq!(
        s.reason.as_deref(),
        Some(r#"RBAC: role.rbac.authorization.k8s.io "missing" not found"#)
    );
}

#[tokio::test]
async fn creating_reviews_needs_rbac_as_in_kube_apiserver() {
    let t = start_with(rbac).await;
    grant_alice(&t.client).await;
    let admin_api = client_as(&t.cluster, ADMIN_API).await;

    // Without a grant: kube-apiserver's 403.
    let s = status_of(ask(&admin_api, alice("create", "workflows", "team-a")).await);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        format!(
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"{ADMIN_API}\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
        )
    );
    let tr: TokenReview = review(
        "authentication.k8s.io",
        "TokenReview",
        json!({"token": "alice"}),
    );
    let s = status_of(
        Api::<TokenReview>::all(admin_api.clone())
            .create(&PostParams::default(), &tr)
            .await,
    );
    assert_eq!(
        s.message,
        format!(
            "tokenreviews.authentication.k8s.io is forbidden: User \"{ADMIN_API}\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"
        )
    );
    let lsar: LocalSubjectAccessReview = review(
        "authorization.k8s.io",
        "LocalSubjectAccessReview",
        alice("create", "workflows", "team-a"),
    );
    let local = Api::<LocalSubjectAccessReview>::namespaced(admin_api.clone(), "team-a");
    let s = status_of(local.create(&PostParams::default(), &lsar).await);
    assert!(
        s.message.ends_with(
            "cannot create resource \"localsubjectaccessreviews\" in API group \"authorization.k8s.io\" in the namespace \"team-a\""
        ),
        "{}",
        s.message
    );
    assert!(
        !t.cluster
            .audit()
            .iter()
            .any(|r| r.resource == "subjectaccessreviews"),
        "refused reviews are not audited"
    );

    // The grant kube's system:auth-delegator gives.
    create_all(
        &t.client,
        &[
            cluster_role(
                "auth-delegator",
                json!([
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
                ]),
            ),
            cluster_role_binding(
                "weft-admin-api",
                "auth-delegator",
                json!([{"kind": "ServiceAccount", "name": "weft-admin-api", "namespace": "weft-system"}]),
            ),
        ],
    )
    .await;
    assert!(
        status(&admin_api, alice("create", "workflows", "team-a"))
            .await
            .allowed
    );
    Api::<TokenReview>::all(admin_api.clone())
        .create(&PostParams::default(), &tr)
        .await
        .unwrap();
    let rec = t
        .cluster
        .audit()
        .into_iter()
        .find(|r| r.resource == "subjectaccessreviews")
        .unwrap();
    assert_eq!(
        (rec.user.as_str(), rec.verb.as_str(), rec.api_group.as_str()),
        (ADMIN_API, "create", "authorization.k8s.io")
    );
    // LocalSubjectAccessReviews are a grant of their own, per namespace.
    create_all(
        &t.client,
        &[
            role(
                "team-a",
                "local-reviewer",
                json!([{"apiGroups": ["authorization.k8s.io"],
                        "resources": ["localsubjectaccessreviews"], "verbs": ["create"]}]),
            ),
            role_binding(
                "team-a",
                "admin-api-reviews",
                "local-reviewer",
                json!([{"kind": "ServiceAccount", "name": "weft-admin-api", "namespace": "weft-system"}]),
            ),
        ],
    )
    .await;
    let answer = local.create(&PostParams::default(), &lsar).await.unwrap();
    assert!(answer.status.unwrap().allowed);
    assert_eq!(answer.metadata.namespace.as_deref(), Some("team-a"));

    // Every authenticated user may ask about itself (system:basic-user).
    let bob = client_as(&t.cluster, "bob").await;
    let ssar: SelfSubjectAccessReview = review(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        json!({"resourceAttributes": {"namespace": "team-a", "verb": "create",
                                      "group": "weft.dev", "resource": "workflows"}}),
    );
    let own = Api::<SelfSubjectAccessReview>::all(bob.clone())
        .create(&PostParams::default(), &ssar)
        .await
        .unwrap();
    assert!(!own.status.unwrap().allowed);
    let own = Api::<SelfSubjectAccessReview>::all(client_as(&t.cluster, "alice").await)
        .create(&PostParams::default(), &ssar)
        .await
        .unwrap();
    assert!(own.status.unwrap().allowed);
    let me = Api::<SelfSubjectReview>::all(bob)
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let info = me.status.unwrap().user_info.unwrap();
    assert_eq!(info.username.as_deref(), Some("bob"));
    assert_eq!(info.groups, Some(vec!["system:authenticated".to_string()]));
    assert!(me.metadata.creation_timestamp.is_some());

    // What alice may do in team-a, as `kubectl auth can-i --list` asks.
    let rules: SelfSubjectRulesReview = review(
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        json!({"namespace": "team-a"}),
    );
    let rules = Api::<SelfSubjectRulesReview>::all(client_as(&t.cluster, "alice").await)
        .create(&PostParams::default(), &rules)
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!rules.incomplete);
    assert!(rules.resource_rules.iter().any(|r| {
        r.resources.as_deref() == Some(&["workflows".to_string()][..]) && r.verbs == ["create"]
    }));
    assert!(rules.resource_rules.iter().any(|r| {
        r.resources.as_deref()
            == Some(
                &[
                    "selfsubjectaccessreviews".to_string(),
                    "selfsubjectrulesreviews".to_string(),
                ][..],
            )
    }));
    assert!(
        rules
            .non_resource_rules
            .iter()
            .any(|r| r.non_resource_urls.as_deref()
                == Some(&["/logs".to_string(), "/logs/*".to_string()][..]))
    );
}

#[tokio::test]
async fn token_reviews_authenticate_as_requests_do() {
    let t = start_with(rbac).await;
    let reviews: Api<TokenReview> = Api::all(t.client.clone());
    let tr = |spec: Value| -> TokenReview { review("authentication.k8s.io", "TokenReview", spec) };

    let answer = reviews
        .create(
            &PostParams::default(),
            &tr(
                json!({"token": "system:serviceaccount:weft-system:weft-controller",
                       "audiences": ["weft-admin"]}),
            ),
        )
        .await
        .unwrap();
    let s = answer.status.unwrap();
    assert_eq!(s.authenticated, Some(true));
    assert_eq!(s.error, None);
    let user = s.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:weft-system:weft-controller")
    );
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:weft-system",
            "system:authenticated"
        ]
    );
    assert_eq!(user.uid, None);
    // No token is bound to an audience here: the asked ones are echoed.
    assert_eq!(s.audiences, Some(vec!["weft-admin".to_string()]));
    assert_eq!(answer.spec.audiences, Some(vec!["weft-admin".to_string()]));

    let s = reviews
        .create(&PostParams::default(), &tr(json!({"token": "alice"})))
        .await
        .unwrap()
        .status
        .unwrap();
    let user = s.user.unwrap();
    assert_eq!(
        (user.username.as_deref(), user.groups),
        (
            Some("alice"),
            Some(vec!["system:authenticated".to_string()])
        )
    );
    assert_eq!(s.audiences, None);

    // A blank token authenticates no one; an empty one is refused.
    let s = reviews
        .create(&PostParams::default(), &tr(json!({"token": "   "})))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(s.authenticated, None);
    assert_eq!(s.user.unwrap().username, None);
    let e = status_of(reviews.create(&PostParams::default(), &tr(json!({}))).await);
    assert_eq!(
        (e.code, e.reason.as_str(), e.message.as_str()),
        (
            400,
            "BadRequest",
            "token is required for TokenReview in authentication"
        )
    );
}

#[tokio::test]
async fn invalid_reviews_are_refused_with_kube_apiserver_words() {
    let t = start_with(rbac).await;
    let attrs = json!({"verb": "get", "resource": "pods"});
    let urls = json!({"verb": "get", "path": "/x"});

    let s = status_of(ask(&t.client, json!({"user": "alice"})).await);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    let details = s.details.unwrap();
    assert_eq!(
        (
            details.group.as_str(),
            details.kind.as_str(),
            details.name.as_str()
        ),
        ("authorization.k8s.io", "", "")
    );
    assert_eq!(details.causes.len(), 1);
    assert_eq!(
        (
            details.causes[0].field.as_str(),
            details.causes[0].reason.as_str()
        ),
        ("spec.resourceAttributes", "FieldValueInvalid")
    );

    let s = status_of(
        ask(
            &t.client,
            json!({"resourceAttributes": attrs, "nonResourceAttributes": urls}),
        )
        .await,
    );
    assert_eq!(
        s.message,
        ".authorization.k8s.io \"\" is invalid: [spec.nonResourceAttributes: Invalid value: {\"Path\":\"/x\",\"Verb\":\"get\"}: cannot be specified in combination with resourceAttributes, spec.user: Invalid value: \"\": at least one of user or group must be specified]"
    );
    let fields: Vec<String> = s
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(fields, ["spec.nonResourceAttributes", "spec.user"]);

    // A LocalSubjectAccessReview is about its own namespace only.
    let local = Api::<LocalSubjectAccessReview>::namespaced(t.client.clone(), "team-a");
    let lsar = |ra_ns: &str, meta_ns: Option<&str>| -> LocalSubjectAccessReview {
        let mut l: LocalSubjectAccessReview = review(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            json!({"user": "alice",
                   "resourceAttributes": {"namespace": ra_ns, "verb": "get", "resource": "pods"}}),
        );
        l.metadata.namespace = meta_ns.map(String::from);
        l
    };
    let s = status_of(
        local
            .create(&PostParams::default(), &lsar("team-b", None))
            .await,
    );
    assert_eq!(
        (s.code, s.message.as_str()),
        (
            422,
            ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"team-b\": must match metadata.namespace"
        )
    );
    let s = status_of(local.create(&PostParams::default(), &lsar("", None)).await);
    assert!(
        s.message.ends_with(
            "spec.resourceAttributes.namespace: Invalid value: \"\": must match metadata.namespace"
        ),
        "{}",
        s.message
    );
    let s = status_of(
        local
            .create(&PostParams::default(), &lsar("team-a", Some("team-b")))
            .await,
    );
    assert_eq!(
        (s.code, s.reason.as_str(), s.message.as_str()),
        (
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    );
    let answer = local
        .create(&PostParams::default(), &lsar("team-a", None))
        .await
        .unwrap();
    assert!(!answer.status.unwrap().allowed);

    // Metadata must be empty.
    let mut named: SubjectAccessReview = review(
        "authorization.k8s.io",
        "SubjectAccessReview",
        json!({"user": "alice", "resourceAttributes": attrs}),
    );
    named.metadata.name = Some("x".into());
    let s = status_of(
        Api::<SubjectAccessReview>::all(t.client.clone())
            .create(&PostParams::default(), &named)
            .await,
    );
    assert_eq!(
        s.message,
        ".authorization.k8s.io \"\" is invalid: metadata: Invalid value: {\"name\":\"x\"}: must be empty"
    );
}

#[tokio::test]
async fn always_allow_allows_every_review_and_says_why() {
    let t = start().await;
    let s = status(&t.client, alice("delete", "workflows", "team-b")).await;
    assert!(s.allowed);
    assert_eq!(
        s.reason.as_deref(),
        Some(
            "allowed: the dev cluster runs with Authorization::AlwaysAllow, which allows every request"
        )
    );
    // Validation still applies.
    assert_eq!(status_of(ask(&t.client, json!({})).await).code, 422);
    let me = Api::<SelfSubjectReview>::all(t.client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    assert_eq!(
        me.status.unwrap().user_info.unwrap().username.as_deref(),
        Some("system:anonymous")
    );
}

/// The Workflow CRD, for kubectl to map `workflows.weft.dev`.
fn workflow_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "workflows.weft.dev"},
           "spec": {"group": "weft.dev", "scope": "Namespaced",
                    "names": {"plural": "workflows", "singular": "workflow",
                              "kind": "Workflow", "listKind": "WorkflowList"},
                    "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

/// `kubectl auth can-i` and `whoami` (protobuf SelfSubjectAccessReviews,
/// SelfSubjectRulesReviews and SelfSubjectReviews, impersonating with
/// `--as`) and `kubectl create` of a SubjectAccessReview (JSON).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_and_whoami() {
    let t = start_with(rbac).await;
    create_all(&t.client, &[workflow_crd()]).await;
    grant_alice(&t.client).await;
    let Some(k) = Kubectl::new(&t) else { return };
    let can_i = |args: &[&'static str]| [&["auth", "can-i"][..], args].concat();

    let (ok, out, err) = k
        .run(&can_i(&[
            "create",
            "workflows.weft.dev",
            "-n",
            "team-a",
            "--as",
            "alice",
        ]))
        .await;
    assert!(ok && out.trim() == "yes", "{out}\n{err}");
    let (ok, out, _) = k
        .run(&can_i(&[
            "create",
            "workflows.weft.dev",
            "-n",
            "team-b",
            "--as",
            "alice",
        ]))
        .await;
    assert!(!ok && out.trim() == "no", "{out}");
    let (ok, out, err) = k
        .run(&can_i(&[
            "update",
            "workflows.weft.dev",
            "--subresource=approval",
            "-n",
            "team-a",
            "--as",
            "alice",
        ]))
        .await;
    assert!(ok && out.trim() == "yes", "{out}\n{err}");
    let (ok, out, err) = k
        .run(&can_i(&["get", "/logs/today", "--as", "alice"]))
        .await;
    assert!(ok && out.trim() == "yes", "{out}\n{err}");
    let (ok, out, _) = k.run(&can_i(&["get", "/metrics", "--as", "alice"])).await;
    assert!(!ok && out.trim() == "no", "{out}");
    // Without --as kubectl is the admin (system:masters).
    let (ok, out, err) = k.run(&can_i(&["delete", "nodes"])).await;
    assert!(ok && out.trim() == "yes", "{out}\n{err}");

    let out = k
        .ok(&["auth", "can-i", "--list", "-n", "team-a", "--as", "alice"])
        .await;
    assert!(
        out.lines()
            .any(|l| l.starts_with("workflows.weft.dev ") && l.ends_with("[create]")),
        "{out}"
    );
    assert!(out.contains("[/logs/*]"), "{out}");

    let out = k
        .ok(&["auth", "whoami", "--as", "alice", "--as-group", "team-a"])
        .await;
    assert!(out.contains("alice"), "{out}");
    assert!(out.contains("[team-a system:authenticated]"), "{out}");
    let me = k.json(&["auth", "whoami"]).await;
    assert_eq!(me["status"]["userInfo"]["username"], "system:admin");

    // A SubjectAccessReview from a file, as JSON.
    let file = write(
        t.dir.path(),
        "sar.yaml",
        "apiVersion: authorization.k8s.io/v1\nkind: SubjectAccessReview\nspec:\n  user: alice\n  resourceAttributes:\n    namespace: team-a\n    verb: create\n    group: weft.dev\n    resource: workflows\n",
    );
    let answer = k.json(&["create", "-f", &file]).await;
    assert_eq!(answer["status"]["allowed"], true, "{answer}");
    assert_eq!(
        answer["status"]["reason"],
        r#"RBAC: allowed by RoleBinding "alice-workflows/team-a" of Role "workflow-creator" to User "alice""#
    );
}
