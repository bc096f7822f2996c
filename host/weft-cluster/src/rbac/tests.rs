use super::*;

fn attrs(method: &str, path: &str, query: Option<&str>) -> Attributes {
    request_attributes(method, path, query)
}

/// (verb, group, namespace, resource, subresource, name)
fn tuple(a: &Attributes) -> (&str, &str, &str, &str, &str, &str) {
    (
        &a.verb,
        &a.api_group,
        &a.namespace,
        &a.resource,
        &a.subresource,
        &a.name,
    )
}

#[test]
fn methods_and_paths_map_to_kubernetes_verbs() {
    let cases = [
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            None,
            ("list", "", "default", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            Some("watch=true"),
            ("watch", "", "default", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods",
            Some("watch=false"),
            ("list", "", "default", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p",
            None,
            ("get", "", "default", "pods", "", "p"),
        ),
        (
            "POST",
            "/api/v1/namespaces/default/pods",
            None,
            ("create", "", "default", "pods", "", ""),
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/pods/p/status",
            None,
            ("update", "", "default", "pods", "status", "p"),
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/ns/deployments/d",
            None,
            ("patch", "apps", "ns", "deployments", "", "d"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/pods/p",
            None,
            ("delete", "", "default", "pods", "", "p"),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/pods",
            None,
            ("deletecollection", "", "default", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/pods",
            None,
            ("list", "", "", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/nodes/n",
            None,
            ("get", "", "", "nodes", "", "n"),
        ),
        (
            "GET",
            "/api/v1/namespaces",
            None,
            ("list", "", "", "namespaces", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns",
            None,
            ("get", "", "ns", "namespaces", "", "ns"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns/finalize",
            None,
            ("update", "", "ns", "namespaces", "finalize", "ns"),
        ),
        (
            "GET",
            "/api/v1/namespaces/default/pods/p/log",
            None,
            ("get", "", "default", "pods", "log", "p"),
        ),
        (
            "GET",
            "/api/v1/watch/namespaces/default/pods",
            None,
            ("watch", "", "default", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/default/configmaps",
            Some("fieldSelector=metadata.name%3Dcm&watch=1"),
            ("watch", "", "default", "configmaps", "", "cm"),
        ),
        (
            "GET",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            None,
            (
                "list",
                "rbac.authorization.k8s.io",
                "",
                "clusterroles",
                "",
                "",
            ),
        ),
    ];
    for (method, path, query, want) in cases {
        let a = attrs(method, path, query);
        assert!(a.resource_request, "{method} {path}");
        assert_eq!(tuple(&a), want, "{method} {path} {query:?}");
    }
}

#[test]
fn discovery_and_plain_paths_are_not_resource_requests() {
    for path in [
        "/",
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/version",
        "/openapi/v3",
    ] {
        let a = attrs("GET", path, None);
        assert!(!a.resource_request, "{path}");
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", path));
    }
    assert_eq!(attrs("POST", "/healthz", None).verb, "post");
}

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
    let v = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
    PolicyRule {
        verbs: v(verbs),
        api_groups: v(groups),
        resources: v(resources),
        resource_names: v(names),
        non_resource_urls: Vec::new(),
    }
}

#[test]
fn rules_match_verbs_groups_resources_and_names() {
    let create_pod = attrs("POST", "/api/v1/namespaces/default/pods", None);
    let get_pod = attrs("GET", "/api/v1/namespaces/default/pods/p", None);
    let pod_status = attrs("PATCH", "/api/v1/namespaces/default/pods/p/status", None);
    let deploy = attrs(
        "GET",
        "/apis/apps/v1/namespaces/default/deployments/p",
        None,
    );
    assert!(rule(&["create", "patch"], &[""], &["pods"], &[]).allows(&create_pod));
    assert!(!rule(&["create"], &[""], &["pods"], &[]).allows(&get_pod));
    assert!(rule(&["*"], &[""], &["pods"], &[]).allows(&get_pod));
    assert!(!rule(&["*"], &["apps"], &["pods"], &[]).allows(&get_pod));
    assert!(rule(&["get"], &["*"], &["*"], &[]).allows(&deploy));
    assert!(!rule(&["patch"], &[""], &["pods"], &[]).allows(&pod_status));
    assert!(rule(&["patch"], &[""], &["pods/status"], &[]).allows(&pod_status));
    assert!(rule(&["patch"], &[""], &["*/status"], &[]).allows(&pod_status));
    assert!(!rule(&["get"], &[""], &["pods/status"], &[]).allows(&get_pod));
    assert!(rule(&["get"], &[""], &["pods"], &["p"]).allows(&get_pod));
    assert!(!rule(&["get"], &[""], &["pods"], &["q"]).allows(&get_pod));
    // A create has no name, so resourceNames never grant it.
    assert!(!rule(&["create"], &[""], &["pods"], &["p"]).allows(&create_pod));
}

#[test]
fn non_resource_rules_match_urls_and_prefixes() {
    let mut r = rule(&["get"], &[], &[], &[]);
    r.non_resource_urls = vec!["/apis/*".into(), "/version".into()];
    assert!(r.allows(&attrs("GET", "/apis/apps/v1", None)));
    assert!(r.allows(&attrs("GET", "/version", None)));
    assert!(!r.allows(&attrs("GET", "/api", None)));
    assert!(!r.allows(&attrs("POST", "/version", None)));
    // Non-resource rules never grant resources.
    assert!(!r.allows(&attrs("GET", "/apis/apps/v1/deployments", None)));
}

#[test]
fn refusals_are_worded_as_kube_apiserver_words_them() {
    let sa = UserInfo::token_user("system:serviceaccount:default:weft-plugin-echo");
    let a = attrs("POST", "/api/v1/namespaces/default/configmaps", None);
    let e = forbidden(&sa, &a, "");
    assert_eq!(
        e.message,
        "configmaps is forbidden: User \"system:serviceaccount:default:weft-plugin-echo\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(e.details, serde_json::json!({"kind": "configmaps"}));
    let a = attrs("GET", "/apis/apps/v1/namespaces/ns/deployments/d", None);
    let e = forbidden(
        &sa,
        &a,
        "RBAC: role.rbac.authorization.k8s.io \"r\" not found",
    );
    assert_eq!(
        e.message,
        "deployments.apps \"d\" is forbidden: User \"system:serviceaccount:default:weft-plugin-echo\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"ns\": RBAC: role.rbac.authorization.k8s.io \"r\" not found"
    );
    assert_eq!(
        e.details,
        serde_json::json!({"group": "apps", "kind": "deployments", "name": "d"})
    );
    let e = forbidden(&sa, &attrs("GET", "/api/v1/nodes", None), "");
    assert!(
        e.message
            .ends_with("cannot list resource \"nodes\" in API group \"\" at the cluster scope")
    );
    let e = forbidden(&sa, &attrs("GET", "/metrics", None), "");
    assert_eq!(
        e.message,
        "forbidden: User \"system:serviceaccount:default:weft-plugin-echo\" cannot get path \"/metrics\""
    );
    assert_eq!(e.code, 403);
}

#[test]
fn modes_parse_from_kube_apiserver_names() {
    assert_eq!(
        "RBAC".parse::<Authorization>().unwrap(),
        Authorization::Rbac
    );
    assert_eq!(
        "AlwaysAllow".parse::<Authorization>().unwrap(),
        Authorization::AlwaysAllow
    );
    assert!("Node".parse::<Authorization>().is_err());
}

#[test]
fn allowing_bindings_are_described_as_the_rbac_authorizer_describes_them() {
    let rb = serde_json::json!({
        "metadata": {"name": "alice-workflows", "namespace": "team-a"},
        "roleRef": {"kind": "Role", "name": "workflow-creator"},
    });
    let user = serde_json::json!({"kind": "User", "name": "alice"});
    assert_eq!(
        describe_binding(&rb, "team-a", &user),
        r#"RoleBinding "alice-workflows/team-a" of Role "workflow-creator" to User "alice""#
    );
    let crb = serde_json::json!({
        "metadata": {"name": "ops"},
        "roleRef": {"kind": "ClusterRole", "name": "viewer"},
    });
    let sa = serde_json::json!({"kind": "ServiceAccount", "name": "ctl", "namespace": "sys"});
    assert_eq!(
        describe_binding(&crb, "", &sa),
        r#"ClusterRoleBinding "ops" of ClusterRole "viewer" to ServiceAccount "ctl/sys""#
    );
    // A RoleBinding's ServiceAccount without a namespace is in the binding's.
    let sa = serde_json::json!({"kind": "ServiceAccount", "name": "ctl"});
    assert!(describe_binding(&rb, "team-a", &sa).ends_with(r#"to ServiceAccount "ctl/team-a""#));
}

#[test]
fn errors_aggregate_as_apimachinery_prints_them() {
    let e = |s: &str| s.to_string();
    assert_eq!(aggregate(&[e("a")]), "a");
    assert_eq!(aggregate(&[e("a"), e("a")]), "a");
    assert_eq!(aggregate(&[e("a"), e("b"), e("a")]), "[a, b]");
}
