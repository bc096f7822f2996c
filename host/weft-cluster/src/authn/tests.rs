use super::*;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

#[test]
fn tokens_name_users_with_their_groups() {
    let sa = UserInfo::token_user("system:serviceaccount:ns:x");
    assert_eq!(
        sa.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:ns",
            AUTHENTICATED
        ]
    );
    assert_eq!(
        UserInfo::token_user("weft-controller").groups,
        [AUTHENTICATED]
    );
    assert_eq!(
        bearer_token(&headers(&[("authorization", "Bearer weft-controller")])),
        Some("weft-controller")
    );
    assert_eq!(bearer_token(&headers(&[])), None);
    assert_eq!(UserInfo::tokenless(Authorization::Rbac).name, ADMIN);
    assert_eq!(
        UserInfo::tokenless(Authorization::AlwaysAllow).name,
        ANONYMOUS
    );
}

#[test]
fn impersonation_headers_become_requests_in_order() {
    let h = headers(&[
        ("impersonate-uid", "u-1"),
        ("impersonate-extra-scopes%2fv1", "a"),
        ("impersonate-group", "g1"),
        ("impersonate-group", "g2"),
        ("impersonate-user", "system:serviceaccount:default:echo"),
    ]);
    let reqs = act_as(&h).unwrap();
    assert_eq!(
        reqs,
        [
            ActAs::ServiceAccount {
                namespace: "default".into(),
                name: "echo".into()
            },
            ActAs::Group("g1".into()),
            ActAs::Group("g2".into()),
            ActAs::Extra {
                key: "scopes/v1".into(),
                value: "a".into()
            },
            ActAs::Uid("u-1".into()),
        ]
    );
    let a = reqs[3].attributes();
    assert_eq!(
        (
            a.api_group.as_str(),
            a.resource.as_str(),
            a.subresource.as_str()
        ),
        ("authentication.k8s.io", "userextras", "scopes/v1")
    );
    let a = reqs[0].attributes();
    assert_eq!(
        (a.resource.as_str(), a.namespace.as_str(), a.name.as_str()),
        ("serviceaccounts", "default", "echo")
    );
    assert!(act_as(&headers(&[("impersonate-group", "g")])).is_err());
}

#[test]
fn impersonated_users_get_kube_apiserver_groups() {
    let sa = ActAs::ServiceAccount {
        namespace: "default".into(),
        name: "echo".into(),
    };
    let u = impersonated(std::slice::from_ref(&sa));
    assert_eq!(u.name, "system:serviceaccount:default:echo");
    assert_eq!(
        u.groups,
        [
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            AUTHENTICATED
        ]
    );
    let u = impersonated(&[sa, ActAs::Group("g".into())]);
    assert_eq!(u.groups, ["g", AUTHENTICATED]);
    let u = impersonated(&[
        ActAs::User("alice".into()),
        ActAs::Group(AUTHENTICATED.into()),
    ]);
    assert_eq!(u.groups, [AUTHENTICATED]);
    assert_eq!(
        impersonated(&[ActAs::User(ANONYMOUS.into())]).groups,
        [UNAUTHENTICATED]
    );
}
