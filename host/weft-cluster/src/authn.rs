//! Who a request comes from, and who it acts as.
//!
//! The dev cluster does not authenticate: a bearer token (`token:` in a
//! kubeconfig) is taken as the user's name, so a test can be any user by
//! writing a kubeconfig (kube-rs sends it over plain HTTP; kubectl does
//! not, so it is always the tokenless user). The groups are those kube-apiserver's
//! authenticators give such a user, since RBAC bindings name them.
//!
//! `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
//! `Impersonate-Extra-<key>` (what `kubectl --as`/`--as-group` and kube-rs'
//! `impersonate` send) then replace that user, after the `impersonate`
//! checks kube-apiserver's impersonation filter makes.

use hyper::HeaderMap;

use crate::rbac::{Attributes, Authorization, Authorizer};
use crate::status::{ApiError, ApiResult};
pub(crate) use crate::user::{
    ADMIN, ANONYMOUS, AUTHENTICATED, SA_PREFIX, UNAUTHENTICATED, UserInfo, service_account_groups,
    split_service_account,
};

impl UserInfo {
    /// Without a token: the admin in RBAC mode (so the kubeconfig
    /// [`crate::DevCluster`] writes keeps full rights), else anonymous, as
    /// the audit has always named such requests.
    fn tokenless(mode: Authorization) -> Self {
        match mode {
            Authorization::Rbac => UserInfo {
                name: ADMIN.into(),
                groups: vec!["system:masters".into(), AUTHENTICATED.into()],
            },
            Authorization::AlwaysAllow => UserInfo {
                name: ANONYMOUS.into(),
                groups: vec![UNAUTHENTICATED.into()],
            },
        }
    }
}

/// A request's bearer token, if it has one.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// Who a request is authorized and audited as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) user: UserInfo,
    /// The authenticated user, when it impersonates `user`.
    pub(crate) impersonator: Option<String>,
}

/// One thing the impersonation headers ask to act as.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ActAs {
    ServiceAccount { namespace: String, name: String },
    User(String),
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl ActAs {
    /// What the requester must be allowed: `impersonate` on the
    /// `serviceaccounts`, `users`, `groups`, `uids` or `userextras/<key>`
    /// named like the impersonated value.
    fn attributes(&self) -> Attributes {
        let (group, resource, sub, ns, name) = match self {
            ActAs::ServiceAccount { namespace, name } => {
                ("", "serviceaccounts", "", namespace.as_str(), name)
            }
            ActAs::User(u) => ("", "users", "", "", u),
            ActAs::Group(g) => ("", "groups", "", "", g),
            ActAs::Extra { key, value } => (
                "authentication.k8s.io",
                "userextras",
                key.as_str(),
                "",
                value,
            ),
            ActAs::Uid(u) => ("authentication.k8s.io", "uids", "", "", u),
        };
        Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.clone(),
            ..Default::default()
        }
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = String> + 'a {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(String::from)
}

/// The impersonation headers in the order kube-apiserver checks them:
/// user, groups, extras, uid.
fn act_as(headers: &HeaderMap) -> ApiResult<Vec<ActAs>> {
    let mut out = Vec::new();
    let user = header_values(headers, "impersonate-user").find(|u| !u.is_empty());
    if let Some(u) = &user {
        out.push(match split_service_account(u) {
            Some((ns, name)) => ActAs::ServiceAccount {
                namespace: ns.into(),
                name: name.into(),
            },
            None => ActAs::User(u.clone()),
        });
    }
    out.extend(header_values(headers, "impersonate-group").map(ActAs::Group));
    for name in headers.keys() {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-") {
            let key = percent_decode(key);
            out.extend(
                header_values(headers, name.as_str()).map(|value| ActAs::Extra {
                    key: key.clone(),
                    value,
                }),
            );
        }
    }
    out.extend(
        header_values(headers, "impersonate-uid")
            .find(|u| !u.is_empty())
            .map(ActAs::Uid),
    );
    if user.is_none() && !out.is_empty() {
        return Err(ApiError::internal(format!(
            "requested {out:?} without impersonating a user"
        )));
    }
    Ok(out)
}

/// Extra keys travel percent-encoded in header names (`%2F` for `/`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user the impersonation headers describe. A service account gets
/// its groups only when no group is given; `system:authenticated` is added
/// unless a group already says (un)authenticated, as kube-apiserver does.
fn impersonated(requests: &[ActAs]) -> UserInfo {
    let groups_given = requests.iter().any(|r| matches!(r, ActAs::Group(_)));
    let mut user = UserInfo {
        name: String::new(),
        groups: Vec::new(),
    };
    for r in requests {
        match r {
            ActAs::ServiceAccount { namespace, name } => {
                user.name = format!("{SA_PREFIX}{namespace}:{name}");
                if !groups_given {
                    user.groups = service_account_groups(namespace);
                }
            }
            ActAs::User(u) => user.name = u.clone(),
            ActAs::Group(g) => user.groups.push(g.clone()),
            ActAs::Extra { .. } | ActAs::Uid(_) => {}
        }
    }
    let has = |g: &str| user.groups.iter().any(|x| x == g);
    if user.name != ANONYMOUS {
        if !has(AUTHENTICATED) && !has(UNAUTHENTICATED) {
            user.groups.push(AUTHENTICATED.into());
        }
    } else if !has(UNAUTHENTICATED) {
        user.groups.push(UNAUTHENTICATED.into());
    }
    user
}

/// Who a request acts as: its token's user, or whom it impersonates once
/// that user is allowed to (refused with kube-apiserver's 403 otherwise;
/// nothing is refused in `AlwaysAllow` mode).
pub(crate) fn caller(headers: &HeaderMap, authz: &Authorizer<'_>) -> ApiResult<Caller> {
    let requester = bearer_token(headers)
        .map(UserInfo::token_user)
        .unwrap_or_else(|| UserInfo::tokenless(authz.mode));
    let requests = act_as(headers)?;
    if requests.is_empty() {
        return Ok(Caller {
            user: requester,
            impersonator: None,
        });
    }
    for r in &requests {
        authz.check(&requester, &r.attributes())?;
    }
    Ok(Caller {
        user: impersonated(&requests),
        impersonator: Some(requester.name),
    })
}

#[cfg(test)]
mod tests;
