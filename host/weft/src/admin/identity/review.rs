//! Service-account tokens (and any token the API server accepts), checked
//! by the API server itself with a TokenReview, as aggregated API servers
//! and Argo Server's `client` mode do.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};

use super::{Identity, Via};

/// How long an answer is reused: every call of a robot carries its token,
/// and the API server need not be asked each time (kube-apiserver's
/// webhook token authenticator caches likewise).
const CACHE_TTL: Duration = Duration::from_secs(10);

/// When the API server answered, and who the token is (`None`: unknown).
type Answer = (Instant, Option<Identity>);

/// TokenReview answers by the token's sha256 (the token is not kept).
#[derive(Default)]
pub struct Reviews {
    answers: Mutex<HashMap<[u8; 32], Answer>>,
}

impl Reviews {
    /// [`review`], answered from the cache when asked in the last
    /// [`CACHE_TTL`]; failures are not cached.
    pub async fn review(
        &self,
        client: &kube::Client,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<Identity>, String> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let lock = || self.answers.lock().unwrap_or_else(|p| p.into_inner());
        let cached = lock()
            .get(&key)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, id)| id.clone());
        if let Some(id) = cached {
            return Ok(id);
        }
        let id = review(client, token, audiences).await?;
        let mut answers = lock();
        answers.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
        answers.insert(key, (Instant::now(), id.clone()));
        Ok(id)
    }
}

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
