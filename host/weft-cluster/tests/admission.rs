//! Admission webhooks called by the dev cluster as kube-apiserver calls
//! them, driven with the real kubectl: a test webhook over HTTPS (its own
//! CA in `caBundle`) refuses, patches, answers late or is down, and the
//! request succeeds or fails with the API server's wording; rules,
//! namespace and object selectors, `failurePolicy`, `timeoutSeconds`,
//! `url` and `service` references, the AdmissionReview sent, and refused
//! configurations.

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// The test's webhook: `/deny` refuses objects labelled `deny`, `/mutate`
/// adds the label `mutated=yes` and a warning, `/slow` answers after 3 s;
/// every review is kept.
struct Hook {
    port: u16,
    ca_bundle: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

async fn start_hook() -> Hook {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let names = vec!["127.0.0.1".to_string(), "test-hook.hooks.svc".to_string()];
    let cert = rcgen::CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let chain = vec![cert.der().clone()];
    let der = rustls_pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, der)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, kept) = (acceptor.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req| {
                    let kept = kept.clone();
                    async move { Ok::<_, Infallible>(answer(req, &kept).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    Hook {
        port,
        ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca.pem()),
        seen,
    }
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<Value>>,
) -> hyper::Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap();
    seen.lock().unwrap().push(review.clone());
    let request = &review["request"];
    let obj = if request["object"].is_null() {
        &request["oldObject"]
    } else {
        &request["object"]
    };
    let mut response = json!({"uid": request["uid"], "allowed": true});
    match path.as_str() {
        "/deny" if obj["metadata"]["labels"]["deny"].is_string() => {
            response["allowed"] = false.into();
            response["status"] = json!({"code": 403, "reason": "Forbidden",
                "message": format!("objects labelled deny are refused ({})", request["operation"])});
        }
        "/mutate" => {
            let patch = if obj["metadata"]["labels"].is_object() {
                json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
            };
            response["patchType"] = "JSONPatch".into();
            // Both encodings of Go's []byte: base64, or numbers (kube-rs).
            response["patch"] = match obj["metadata"]["labels"]["bytes"].is_string() {
                true => patch.to_string().into_bytes().into(),
                false => base64::engine::general_purpose::STANDARD
                    .encode(patch.to_string())
                    .into(),
            };
            response["warnings"] = json!(["the test webhook labelled this object"]);
        }
        "/slow" => tokio::time::sleep(std::time::Duration::from_secs(3)).await,
        _ => {}
    }
    let out = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
    hyper::Response::new(Full::new(Bytes::from(out.to_string())))
}

/// A webhook configuration of `kind` for ConfigMaps.
fn configuration(kind: &str, name: &str, webhook: Value) -> String {
    let mut w = json!({
        "name": format!("{name}.test.weft.dev"),
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                   "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in webhook.as_object().unwrap() {
        w[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
           "metadata": {"name": name}, "webhooks": [w]})
    .to_string()
}

fn url_config(hook: &Hook, path: &str) -> Value {
    json!({"url": format!("https://127.0.0.1:{}{path}", hook.port), "caBundle": hook.ca_bundle})
}

fn configmap(name: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
    .to_string()
}

#[tokio::test]
async fn webhooks_refuse_patch_and_fail_as_configured() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    let hook = start_hook().await;
    let dir = t.dir.path();
    let apply = |name: &str, body: String| write(dir, name, &body);

    // A validating webhook refuses, in kube-apiserver's words; others pass.
    let f = apply(
        "deny.json",
        configuration(
            "ValidatingWebhookConfiguration",
            "deny",
            json!({"clientConfig": url_config(&hook, "/deny")}),
        ),
    );
    k.ok(&["create", "-f", &f]).await;
    let bad = apply("bad.json", configmap("bad", json!({"deny": "1"})));
    let (ok, _, err) = k.run(&["create", "-f", &bad]).await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (Forbidden): error when creating")
            && err.contains(
                "admission webhook \"deny.test.weft.dev\" denied the request: objects labelled deny are refused (\"CREATE\")"
            ),
        "{err}"
    );
    let good = apply("good.json", configmap("good", json!({})));
    k.ok(&["create", "-f", &good]).await;
    // An update that adds the label is refused too; a delete of a labelled
    // object is judged on its old object.
    let (ok, _, err) = k.run(&["label", "cm", "good", "deny=1"]).await;
    assert!(!ok && err.contains("(\"UPDATE\")"), "{err}");
    let (ok, _, err) = k
        .run(&[
            "patch",
            "cm",
            "good",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"deny":"x"}}}"#,
        ])
        .await;
    assert!(!ok && err.contains("denied the request"), "{err}");
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", &bad]).await;
    assert!(!ok && err.contains("(\"CREATE\")"), "{err}");
    // The same with only CREATE in its rules: an apply that creates is a
    // CREATE.
    let create_only = configuration(
        "ValidatingWebhookConfiguration",
        "create-only",
        json!({"clientConfig": url_config(&hook, "/deny"),
               "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                          "operations": ["CREATE"], "resources": ["configmaps"]}]}),
    );
    let f2 = apply("create-only.json", create_only);
    k.ok(&["delete", "validatingwebhookconfiguration", "deny"])
        .await;
    k.ok(&["create", "-f", &f2]).await;
    let (ok, _, err) = k.run(&["apply", "--server-side", "-f", &bad]).await;
    assert!(!ok && err.contains("(\"CREATE\")"), "{err}");
    k.ok(&["delete", "validatingwebhookconfiguration", "create-only"])
        .await;
    k.ok(&["create", "-f", &f]).await;
    k.ok(&["delete", "validatingwebhookconfiguration", "deny"])
        .await;
    k.ok(&["create", "-f", &bad]).await;
    k.ok(&["create", "-f", &f]).await;
    let (ok, _, err) = k.run(&["delete", "cm", "bad"]).await;
    assert!(!ok && err.contains("(\"DELETE\")"), "{err}");
    k.ok(&["delete", "validatingwebhookconfiguration", "deny"])
        .await;
    k.ok(&["delete", "cm", "bad"]).await;

    // A mutating webhook's patch is stored, its warning printed; the
    // review carries the user, the operation and, on update, the old object.
    let f = apply(
        "mutate.json",
        configuration(
            "MutatingWebhookConfiguration",
            "mutate",
            json!({"clientConfig": url_config(&hook, "/mutate")}),
        ),
    );
    k.ok(&["create", "-f", &f]).await;
    let (ok, _, err) = k
        .run(&[
            "create",
            "-f",
            &apply("m.json", configmap("m", json!({"a": "b"}))),
        ])
        .await;
    assert!(ok, "{err}");
    assert!(
        err.contains("Warning: the test webhook labelled this object"),
        "{err}"
    );
    let m = k.json(&["get", "cm", "m"]).await;
    assert_eq!(m["metadata"]["labels"], json!({"a": "b", "mutated": "yes"}));
    k.ok(&[
        "create",
        "-f",
        &apply("n.json", configmap("n", json!({"bytes": "1"}))),
    ])
    .await;
    let n = k.json(&["get", "cm", "n"]).await;
    assert_eq!(n["metadata"]["labels"]["mutated"], "yes");
    k.ok(&["annotate", "cm", "m", "note=1"]).await;
    let reviews = hook.seen.lock().unwrap().clone();
    let update = reviews
        .iter()
        .rev()
        .find(|r| r["request"]["operation"] == "UPDATE")
        .expect("an UPDATE review");
    let r = &update["request"];
    assert_eq!(
        r["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(r["resource"]["resource"], "configmaps");
    assert_eq!(
        (r["name"].as_str(), r["namespace"].as_str()),
        (Some("m"), Some("default"))
    );
    assert_eq!(
        r["oldObject"]["metadata"]["annotations"]["note"],
        Value::Null
    );
    assert_eq!(r["object"]["metadata"]["annotations"]["note"], "1");
    assert!(r["userInfo"]["username"].is_string());
    // A server-side dry run reaches the webhook as one and stores nothing.
    k.ok(&[
        "create",
        "--dry-run=server",
        "-f",
        &apply("d.json", configmap("dry", json!({}))),
    ])
    .await;
    let last = hook.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last["request"]["dryRun"], true);
    let (ok, _, _) = k.run(&["get", "cm", "dry"]).await;
    assert!(!ok, "a dry run stored nothing");
    k.ok(&["delete", "mutatingwebhookconfiguration", "mutate"])
        .await;

    // Down, late or untrusted: refused under Fail, admitted under Ignore.
    let down = json!({"url": "https://127.0.0.1:1/deny", "caBundle": hook.ca_bundle});
    let f = apply(
        "down.json",
        configuration(
            "ValidatingWebhookConfiguration",
            "down",
            json!({"clientConfig": down}),
        ),
    );
    k.ok(&["create", "-f", &f]).await;
    let (ok, _, err) = k
        .run(&["create", "-f", &apply("x.json", configmap("x", json!({})))])
        .await;
    assert!(!ok);
    assert!(
        err.contains("Error from server (InternalError)")
            && err.contains(
                "Internal error occurred: failed calling webhook \"down.test.weft.dev\": failed to call webhook: Post \"https://127.0.0.1:1/deny?timeout=10s\": dial tcp 127.0.0.1:1: connect: connection refused"
            ),
        "{err}"
    );
    k.ok(&["delete", "validatingwebhookconfiguration", "down"])
        .await;
    let f = apply(
        "slow.json",
        configuration(
            "ValidatingWebhookConfiguration",
            "slow",
            json!({"clientConfig": url_config(&hook, "/slow"), "timeoutSeconds": 1}),
        ),
    );
    k.ok(&["create", "-f", &f]).await;
    let (ok, _, err) = k
        .run(&["create", "-f", &apply("x.json", configmap("x", json!({})))])
        .await;
    assert!(
        !ok && err.contains("/slow?timeout=1s\": context deadline exceeded"),
        "{err}"
    );
    k.ok(&["delete", "validatingwebhookconfiguration", "slow"])
        .await;
    let stranger = start_hook().await;
    let untrusted = json!({"url": format!("https://127.0.0.1:{}/deny", hook.port), "caBundle": stranger.ca_bundle});
    for (policy, admitted) in [("Fail", false), ("Ignore", true)] {
        let f = apply(
            "untrusted.json",
            configuration(
                "ValidatingWebhookConfiguration",
                "untrusted",
                json!({"clientConfig": untrusted, "failurePolicy": policy}),
            ),
        );
        k.ok(&["create", "-f", &f]).await;
        let (ok, _, err) = k
            .run(&[
                "create",
                "-f",
                &apply("x.json", configmap("x", json!({"deny": "1"}))),
            ])
            .await;
        assert_eq!(ok, admitted, "{policy}: {err}");
        if !admitted {
            assert!(err.contains("tls: failed to verify certificate"), "{err}");
        }
        k.ok(&["delete", "validatingwebhookconfiguration", "untrusted"])
            .await;
    }
}

#[tokio::test]
async fn selectors_services_and_refused_configurations() {
    let t = start().await;
    let Some(k) = Kubectl::new(&t) else { return };
    let hook = start_hook().await;
    let dir = t.dir.path();
    k.ok(&["create", "namespace", "hooks"]).await;
    k.ok(&["create", "namespace", "watched"]).await;
    k.ok(&["label", "namespace", "watched", "admission=on"])
        .await;
    // Reached through a Service, as a cluster install registers it: the
    // certificate is checked against test-hook.hooks.svc.
    let svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "test-hook", "namespace": "hooks"},
        "spec": {"ports": [{"port": 443, "targetPort": hook.port}]}});
    k.ok(&["create", "-f", &write(dir, "svc.json", &svc.to_string())])
        .await;
    let client_config = json!({"service": {"namespace": "hooks", "name": "test-hook", "path": "/deny"},
                               "caBundle": hook.ca_bundle});
    let f = write(
        dir,
        "sel.json",
        &configuration(
            "ValidatingWebhookConfiguration",
            "sel",
            json!({"clientConfig": client_config,
                   "namespaceSelector": {"matchLabels": {"admission": "on"}},
                   "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}}),
        ),
    );
    k.ok(&["create", "-f", &f]).await;
    let bad = write(dir, "bad.json", &configmap("bad", json!({"deny": "1"})));
    let skipped = write(
        dir,
        "skipped.json",
        &configmap("skipped", json!({"deny": "1", "skip": "y"})),
    );
    // Outside the selected namespace, or opted out: not called.
    k.ok(&["create", "-f", &bad, "-n", "default"]).await;
    k.ok(&["create", "-f", &skipped, "-n", "watched"]).await;
    let (ok, _, err) = k.run(&["create", "-f", &bad, "-n", "watched"]).await;
    assert!(!ok && err.contains("denied the request"), "{err}");
    let calls = hook.seen.lock().unwrap().len();
    assert_eq!(calls, 1, "only the selected object was reviewed");

    // Configurations the API server refuses, with the field named.
    let broken = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "broken"},
        "webhooks": [{"name": "short", "clientConfig": {"url": "http://127.0.0.1/x"},
                      "admissionReviewVersions": ["v1beta1"]}]});
    let (ok, _, err) = k
        .run(&[
            "create",
            "-f",
            &write(dir, "broken.json", &broken.to_string()),
        ])
        .await;
    assert!(!ok, "{err}");
    for field in [
        "webhooks[0].name",
        "webhooks[0].clientConfig.url",
        "webhooks[0].sideEffects: Required value",
        "webhooks[0].admissionReviewVersions",
    ] {
        assert!(err.contains(field), "{field} in {err}");
    }
}
