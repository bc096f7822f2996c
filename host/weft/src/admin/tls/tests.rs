use super::*;

fn files(dir: &Path) -> TlsConfig {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("tls.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).unwrap();
    TlsConfig {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: None,
        client_auth_optional: false,
    }
}

#[test]
fn offers_both_http_versions_h2_first() {
    let dir = tempfile::tempdir().unwrap();
    let config = server_config(&files(dir.path())).unwrap();
    assert_eq!(
        config.alpn_protocols,
        [b"h2".to_vec(), b"http/1.1".to_vec()]
    );
}

#[test]
fn client_ca_is_read_and_bad_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut tls = files(dir.path());
    tls.client_ca = Some(tls.cert.clone());
    server_config(&tls).unwrap();

    tls.client_ca = Some(dir.path().join("missing.pem"));
    let e = format!("{:#}", server_config(&tls).unwrap_err());
    assert!(
        e.contains("admin TLS client CA") && e.contains("missing.pem"),
        "{e}"
    );

    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    tls.client_ca = None;
    tls.cert = dir.path().join("empty.pem");
    let e = format!("{:#}", server_config(&tls).unwrap_err());
    assert!(e.contains("no certificate in it"), "{e}");

    let mut tls = files(dir.path());
    tls.key = tls.cert.clone();
    let e = format!("{:#}", server_config(&tls).unwrap_err());
    assert!(e.contains("no private key in it"), "{e}");
}
