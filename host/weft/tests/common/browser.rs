//! A real browser for the console tests: Debian's headless Chromium through
//! ChromeDriver (WebDriver, by fantoccini), and the waits and screenshots
//! the scenarios share (tests/console.rs, tests/sso.rs).

use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use super::{free_port, root};

/// ChromeDriver and a headless Chromium session.
pub struct Browser {
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
    /// The WebDriver session.
    pub c: Client,
}

pub async fn browser() -> Browser {
    let port = free_port();
    let driver = tokio::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver (Debian's chromium-driver; `make test` installs it)");
    let profile = tempfile::tempdir().unwrap();
    // The flags keep Chromium from calling home: this machine's network
    // is closed, and the test checks that the page asks nothing outside.
    let args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ];
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.push(format!("--user-data-dir={}", profile.path().display()));
    // acceptInsecureCerts: the TLS scenario's certificate is self-signed.
    let caps = json!({
        "acceptInsecureCerts": true,
        "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
    });
    let Value::Object(caps) = caps else {
        unreachable!()
    };
    let url = format!("http://127.0.0.1:{port}");
    let mut last = None;
    for _ in 0..100 {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(c) => {
                return Browser {
                    _driver: driver,
                    _profile: profile,
                    c,
                };
            }
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no WebDriver session: {last:?}");
}

/// Waits for `css` to match.
pub async fn find(c: &Client, css: &str) -> anyhow::Result<fantoccini::elements::Element> {
    c.wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
        .map_err(|e| anyhow::anyhow!("{css}: {e}"))
}

/// Runs `script` until it returns true (30 s at most).
pub async fn until(c: &Client, what: &str, script: &str) -> anyhow::Result<()> {
    for _ in 0..300 {
        if c.execute(script, vec![]).await?.as_bool() == Some(true) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{what}: not within 30 s")
}

/// The text of `css`.
pub async fn text(c: &Client, css: &str) -> anyhow::Result<String> {
    Ok(find(c, css).await?.text().await?)
}

/// Runs one scenario; on failure keeps a screenshot and fails the test.
pub async fn scenario<F: std::future::Future<Output = anyhow::Result<()>>>(
    c: &Client,
    name: &str,
    f: F,
) {
    if let Err(e) = f.await {
        let dir = root().join("target/console-screenshots");
        let _ = std::fs::create_dir_all(&dir);
        let shot = dir.join(format!("{name}.png"));
        if let Ok(png) = c.screenshot().await {
            let _ = std::fs::write(&shot, png);
        }
        panic!("{name}: {e:#}\n(screenshot: {})", shot.display());
    }
}
