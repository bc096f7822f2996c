//! Service-account tokens (and any token the API server accepts), checked
//! by the API server itself with a TokenReview, as aggregated API servers
//! and Argo Server's `client` mode do.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;

use super::{Identity, Via};

/// Asks the API server who `token` is. `Ok(None)`: the API server does not
/// know the token (it may still be a static token for the middleware).
pub async fn review(
    client: &kube::Client,
    token: &str,
    audiences: &[String],
) -> Result<Option<Identity>, String> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: (!audiences.is_empty()).then(|| audiences.to_vec()),
        },
        ..Default::default()
    };
    let api: Api<TokenReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| format!("a TokenReview failed: {e}"))?;
    let Some(status) = answer.status else {
        return Ok(None);
    };
    if status.authenticated != Some(true) {
        if let Some(why) = status.error.filter(|e| !e.is_empty()) {
            tracing::debug!(why, "the API server does not know a bearer token");
        }
        return Ok(None);
    }
    let user = status.user.unwrap_or_default();
    let Some(name) = user.username.filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    Ok(Some(Identity {
        user: name,
        groups: user.groups.unwrap_or_default(),
        via: Via::TokenReview,
        expires: None,
    }))
}
