//! The real OpenID Connect provider of the single sign-on tests: npm's
//! `oidc-provider` run with Node.js (tests/support/oidc/, OIDC.md there),
//! and a person's side of its pages done over HTTP (a cookie jar,
//! redirects followed by hand), as a browser would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncBufReadExt as _;

use super::root;

/// alice: group team-a.
pub const ALICE: (&str, &str) = ("alice", "alice-pw");
/// bob: group team-b.
pub const BOB: (&str, &str) = ("bob", "bob-pw");
/// carol: group team-c, which only the console test binds (the real
/// control plane is shared by the tests of a file).
pub const CAROL: (&str, &str) = ("carol", "carol-pw");
/// The console's client secret.
pub const CONSOLE_SECRET: &str = "console-client-secret";

/// A running provider.
pub struct Provider {
    child: tokio::process::Child,
    /// The issuer URL.
    pub issuer: String,
    /// The signing keys (JWKS with private keys).
    pub keys: PathBuf,
    config: PathBuf,
}

impl Provider {
    /// Starts a provider on `port` for an admin API on `admin_port`:
    /// clients `weft-console` (confidential, redirect to the admin port's
    /// `/auth/callback`) and `weft-cli` (public, native: loopback redirect
    /// and the device flow); users alice (team-a) and bob (team-b).
    pub async fn start(dir: &Path, port: u16, admin_port: u16) -> Provider {
        Self::start_with_ttl(dir, port, admin_port, 3600).await
    }

    /// [`Provider::start`] with ID tokens valid for `id_token_secs`.
    pub async fn start_with_ttl(
        dir: &Path,
        port: u16,
        admin_port: u16,
        id_token_secs: u64,
    ) -> Provider {
        let console = format!("http://127.0.0.1:{admin_port}");
        let config = json!({
            "port": port,
            "idTokenTtlSeconds": id_token_secs,
            "keysFile": "keys.json",
            "users": [
                {"username": ALICE.0, "password": ALICE.1, "email": "alice@example.com", "groups": ["team-a"]},
                {"username": BOB.0, "password": BOB.1, "email": "bob@example.com", "groups": ["team-b"]},
                {"username": CAROL.0, "password": CAROL.1, "email": "carol@example.com", "groups": ["team-c"]},
            ],
            "clients": [
                {"client_id": "weft-console", "client_secret": CONSOLE_SECRET,
                 "redirect_uris": [format!("{console}/auth/callback")],
                 "grant_types": ["authorization_code", "refresh_token"],
                 "application_type": "web",
                 "post_logout_redirect_uris": [format!("{console}/")]},
                {"client_id": "weft-cli", "application_type": "native",
                 "redirect_uris": ["http://127.0.0.1/callback"],
                 "grant_types": ["authorization_code", "refresh_token",
                                 "urn:ietf:params:oauth:grant-type:device_code"]},
            ],
        });
        let path = dir.join("oidc.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let mut child = tokio::process::Command::new("node")
            .arg(root().join("tests/support/oidc/provider.mjs"))
            .arg(&path)
            .env("WEFT_OIDC_WATCH_PID", std::process::id().to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(dir.join("oidc.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("node tests/support/oidc/provider.mjs (make oidc installs it)");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let issuer = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the provider did not start in 30 s")
            .unwrap()
            .and_then(|l| l.strip_prefix("ready ").map(String::from))
            .unwrap_or_else(|| panic!("the provider failed: {}", log(dir)));
        Provider {
            child,
            issuer,
            keys: dir.join("keys.json"),
            config: path,
        }
    }

    /// Rotates the signing key (a new first key; old ones stay published)
    /// and waits until the provider signs with it. Answers the new kid.
    pub async fn rotate(&self) -> String {
        let out = tokio::process::Command::new("node")
            .arg(root().join("tests/support/oidc/provider.mjs"))
            .arg("--rotate")
            .arg(&self.keys)
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let kid = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let pid = self.child.id().unwrap() as i32;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).unwrap(),
            rustix::process::Signal::HUP,
        )
        .unwrap();
        for _ in 0..100 {
            let body = reqwest::get(format!("{}/jwks", self.issuer))
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let jwks: serde_json::Value = serde_json::from_slice(&body).unwrap();
            if jwks["keys"][0]["kid"] == kid.as_str() {
                return kid;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the provider never published key {kid}");
    }

    /// The provider's log so far.
    pub fn log(&self) -> String {
        log(self.config.parent().unwrap())
    }
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("oidc.log")).unwrap_or_default()
}

/// A person with a cookie jar, on the provider's pages.
#[derive(Default)]
pub struct Person {
    jar: BTreeMap<String, String>,
}

impl Person {
    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    fn keep(&mut self, resp: &reqwest::Response) {
        for c in resp.headers().get_all("set-cookie") {
            let c = c.to_str().unwrap();
            let pair = c.split(';').next().unwrap();
            if let Some((k, v)) = pair.split_once('=') {
                self.jar.insert(k.trim().into(), v.trim().into());
            }
        }
    }

    fn cookies(&self) -> String {
        self.jar
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> reqwest::Response {
        let resp = req.header("cookie", self.cookies()).send().await.unwrap();
        self.keep(&resp);
        resp
    }

    /// Opens `url` (an authorization URL), signs in as `who` on the login
    /// page when it shows, and follows the provider's redirects; answers
    /// the first URL off the provider (the client's redirect), or the
    /// provider's own page the flow ends on.
    pub async fn sign_in(&mut self, issuer: &str, url: &str, who: (&str, &str)) -> String {
        let http = Self::client();
        let mut url = url.to_string();
        for _ in 0..20 {
            if !url.starts_with(issuer) {
                return url;
            }
            let resp = self.send(http.get(&url)).await;
            if resp.status().is_redirection() {
                url = absolute(issuer, resp.headers()["location"].to_str().unwrap());
                continue;
            }
            let Some(uid) = url.split("/interaction/").nth(1).map(String::from) else {
                // A page of the provider's own (the device flow's success).
                return url;
            };
            let form = [("login", who.0), ("password", who.1)];
            let post = http
                .post(format!("{issuer}/interaction/{uid}/login"))
                .header("content-type", FORM)
                .body(encode(&form));
            let resp = self.send(post).await;
            assert!(
                resp.status().is_redirection(),
                "the login of {} was refused: {}",
                who.0,
                resp.text().await.unwrap()
            );
            url = absolute(issuer, resp.headers()["location"].to_str().unwrap());
        }
        panic!("too many redirects signing in");
    }

    /// Enters `user_code` on the device page and signs in as `who`.
    pub async fn confirm_device(&mut self, issuer: &str, user_code: &str, who: (&str, &str)) {
        let http = Self::client();
        let page = self
            .send(http.get(format!("{issuer}/device")))
            .await
            .text()
            .await
            .unwrap();
        let xsrf = page
            .split("name=\"xsrf\" value=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_else(|| panic!("no xsrf on the device page: {page}"))
            .to_string();
        let code = [("xsrf", xsrf.as_str()), ("user_code", user_code)];
        self.send(
            http.post(format!("{issuer}/device"))
                .header("content-type", FORM)
                .body(encode(&code)),
        )
        .await;
        let confirm = [
            ("xsrf", xsrf.as_str()),
            ("user_code", user_code),
            ("confirm", "yes"),
        ];
        let resp = self
            .send(
                http.post(format!("{issuer}/device"))
                    .header("content-type", FORM)
                    .body(encode(&confirm)),
            )
            .await;
        let next = absolute(issuer, resp.headers()["location"].to_str().unwrap());
        let done = self.sign_in(issuer, &next, who).await;
        assert!(
            done.starts_with(&format!("{issuer}/device/")),
            "the device sign-in ended at {done}"
        );
    }
}

const FORM: &str = "application/x-www-form-urlencoded";

fn encode(pairs: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

fn absolute(issuer: &str, location: &str) -> String {
    match location.starts_with('/') {
        true => format!("{issuer}{location}"),
        false => location.to_string(),
    }
}
