//! Users as RBAC matches them: a name and groups, with the groups
//! kube-apiserver's authenticators give. A leaf below authentication
//! (`crate::authn`) and authorization (`crate::rbac`), which both read it.

/// The user requests without a token are in RBAC mode: the cluster admin.
pub(crate) const ADMIN: &str = "system:admin";
pub(crate) const ANONYMOUS: &str = "system:anonymous";
pub(crate) const AUTHENTICATED: &str = "system:authenticated";
pub(crate) const UNAUTHENTICATED: &str = "system:unauthenticated";
pub(crate) const SA_PREFIX: &str = "system:serviceaccount:";

/// A user and the groups RBAC matches bindings against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub(crate) name: String,
    pub(crate) groups: Vec<String>,
}

impl UserInfo {
    /// The user a bearer token names. A service account's name brings the
    /// groups the service-account token authenticator adds.
    pub(crate) fn token_user(name: &str) -> Self {
        let mut groups = split_service_account(name)
            .map(|(ns, _)| service_account_groups(ns))
            .unwrap_or_default();
        groups.push(AUTHENTICATED.into());
        UserInfo {
            name: name.into(),
            groups,
        }
    }
}

pub(crate) fn service_account_groups(ns: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{ns}"),
    ]
}

/// `system:serviceaccount:NS:NAME` as (NS, NAME).
pub(crate) fn split_service_account(user: &str) -> Option<(&str, &str)> {
    let (ns, name) = user.strip_prefix(SA_PREFIX)?.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}
