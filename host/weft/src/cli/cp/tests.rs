use super::*;

#[test]
fn remote_refs_have_three_parts() {
    assert_eq!(remote("wf/make/model").unwrap(), ("wf", "make", "model"));
    for bad in ["wf/make", "wf//model", "a/b/c/d", "./file"] {
        let e = remote(bad).unwrap_err().to_string();
        assert!(e.contains("WORKFLOW/NODE/ARTIFACT"), "{e}");
    }
}

#[test]
fn upload_names_are_what_the_admin_api_takes() {
    assert_eq!(
        upload_name(Path::new("/tmp/data set.csv"), Kind::File),
        "data_set.csv"
    );
    assert_eq!(upload_name(Path::new("/tmp/.env"), Kind::File), "env");
    assert_eq!(
        upload_name(Path::new("/tmp/model"), Kind::Directory),
        "model.tar.zst"
    );
    assert_eq!(upload_name(Path::new("/tmp/é"), Kind::File), "_");
}

#[test]
fn a_file_into_a_directory_keeps_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    assert_eq!(target(dir.path(), Kind::File, "a").unwrap(), d.join("a"));
    assert_eq!(target(dir.path(), Kind::Directory, "a").unwrap(), d);
    let new = dir.path().join("new");
    assert_eq!(target(&new, Kind::File, "a").unwrap(), new);
}
