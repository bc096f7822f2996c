use super::*;

fn component(len: usize) -> Vec<u8> {
    // Half incompressible, half zeros: compresses, but not below one part.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = b"\0asm\x0d\0\x01\0".to_vec();
    while v.len() < len / 2 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend(x.to_le_bytes());
    }
    v.resize(len, 0);
    v
}

fn join(p: &Packed) -> Vec<u8> {
    match Head::parse(&p.head).unwrap().body {
        Body::Inline(b) => b,
        Body::Parts(names) => names
            .iter()
            .map(|n| {
                let cm = p
                    .parts
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(n))
                    .unwrap();
                part_bytes(cm).unwrap().to_vec()
            })
            .collect::<Vec<_>>()
            .concat(),
    }
}

#[test]
fn small_components_go_inline_compressed() {
    let c = vec![7u8; 200_000];
    let p = pack("x", "x", &c, "m", Pinning::Latest);
    assert!(p.parts.is_empty());
    let head = Head::parse(&p.head).unwrap();
    assert_eq!(head.pinning, Pinning::Latest);
    let packed = join(&p);
    assert!(packed.len() < 10_000, "zstd: {}", packed.len());
    let (bytes, d) = unpack(&packed, head.digest, 1 << 20).unwrap();
    assert_eq!((bytes, d), (c, p.digest));
}

#[test]
fn large_components_are_split_under_the_configmap_limit() {
    let c = component(3 << 20);
    let p = pack("big", "big", &c, "m", Pinning::Pinned);
    assert!(p.parts.len() >= 2, "{} parts", p.parts.len());
    for cm in p.parts.iter().chain([&p.head]) {
        assert!(payload_size(cm) <= CONFIGMAP_LIMIT);
    }
    let head = Head::parse(&p.head).unwrap();
    let (bytes, _) = unpack(&join(&p), head.digest, 8 << 20).unwrap();
    assert_eq!(bytes, c);
}

#[test]
fn caps_digests_and_gzip() {
    use std::io::Write;
    let c = vec![1u8; 100_000];
    let z = compress(&c);
    assert!(matches!(
        unpack(&z, None, 50_000),
        Err(Problem::TooLarge { .. })
    ));
    let wrong = Digest::of(b"other");
    assert!(matches!(
        unpack(&z, Some(wrong), 1 << 20),
        Err(Problem::DigestMismatch { .. })
    ));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&c).unwrap();
    let gz = gz.finish().unwrap();
    assert_eq!(unpack(&gz, Some(Digest::of(&c)), 1 << 20).unwrap().0, c);
    assert!(matches!(
        unpack(&z[..z.len() / 2], None, 1 << 20),
        Err(Problem::Decompress { .. })
    ));
}

#[test]
fn an_archive_is_a_head_under_another_label_and_name() {
    let c = component(3 << 20);
    let p = pack("my-plugin", "mine", &c, "m", Pinning::Pinned);
    let stored = Stored {
        manifest: "m".into(),
        digest: p.digest,
        pinning: Pinning::Pinned,
        packed: compress(&c),
    };
    let a = archive("my-plugin", "mine", &stored);
    let name = a.head.metadata.name.clone().unwrap();
    assert_eq!(name, format!("my-plugin-v-{}", &p.digest.hex()[..12]));
    let labels = a.head.metadata.labels.clone().unwrap();
    assert_eq!(labels.get(LABEL_ARCHIVE).map(String::as_str), Some("mine"));
    assert!(
        !labels.contains_key(LABEL_PLUGIN),
        "an archive is never served"
    );
    assert_eq!(join(&a), join(&p));
    let long = "x".repeat(253);
    let n = archive_name(&long, p.digest);
    assert!(
        n.len() + "-part-123456789012-99".len() <= 253,
        "{}",
        n.len()
    );
}

#[test]
fn heads_need_a_manifest_and_a_digest_for_parts() {
    let mut p = pack("x", "x", b"\0asm", "m", Pinning::Pinned);
    p.head.data.as_mut().unwrap().remove(KEY_MANIFEST);
    assert!(matches!(Head::parse(&p.head), Err(Problem::NoManifest)));
    let mut p = pack("x", "x", b"\0asm", "m", Pinning::Pinned);
    let data = p.head.data.as_mut().unwrap();
    data.insert(KEY_PARTS.into(), "a,b".into());
    data.remove(KEY_DIGEST);
    assert!(matches!(Head::parse(&p.head), Err(Problem::BadDigest(_))));
}
