use super::*;
use crate::digest::Digest;
use serde_json::json;

/// An image in `s` for `os/arch`: a config, one layer, a manifest named `tag`.
fn image(s: &Store, tag: &str, os: &str, arch: &str) -> Digest {
    let config = canonical_json(&json!({
        "architecture": arch, "os": os,
        "rootfs": {"type": "layers", "diff_ids": [Digest::of(tag.as_bytes()).to_string()]},
    }));
    let (cd, cn) = s.put_bytes(&config).unwrap();
    let (ld, ln) = s.put_bytes(format!("layer of {tag}").as_bytes()).unwrap();
    let manifest = canonical_json(&json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "config": {"mediaType": media::OCI_CONFIG, "digest": cd.to_string(), "size": cn},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ld.to_string(), "size": ln}],
    }));
    let (md, mn) = s.put_bytes(&manifest).unwrap();
    let desc: Descriptor = serde_json::from_value(
        json!({"mediaType": media::OCI_MANIFEST, "digest": md.to_string(), "size": mn}),
    )
    .unwrap();
    s.tag(&ImageName::parse(tag).unwrap(), &desc).unwrap();
    md
}

fn store() -> (tempfile::TempDir, Store) {
    let t = tempfile::tempdir().unwrap();
    let s = Store::open(t.path()).unwrap();
    (t, s)
}

fn platforms(s: &Store, name: &ImageName) -> Vec<String> {
    children(s, name)
        .unwrap()
        .iter()
        .map(|c| c.platform.as_ref().unwrap().to_string())
        .collect()
}

#[test]
fn platforms_come_from_the_configs_and_a_list_checks_clean() {
    let (_t, s) = store();
    let amd = image(&s, "app:amd64", "freebsd", "amd64");
    let arm = image(&s, "app:arm64", "freebsd", "aarch64");
    let list = ImageName::parse("app:1").unwrap();
    create(&s, &list, &["app:amd64".into(), "app:arm64".into()]).unwrap();
    assert_eq!(platforms(&s, &list), ["freebsd/amd64", "freebsd/arm64"]);
    let got: Vec<Digest> = children(&s, &list)
        .unwrap()
        .into_iter()
        .map(|c| c.digest)
        .collect();
    assert_eq!(got, [amd, arm]);
    let desc = check(&s, &list).unwrap();
    assert!(media::is_index(desc.media_type()));
    // The same list made again gives the same bytes.
    let bytes = raw(&s, &list).unwrap();
    delete(&s, &list).unwrap();
    create(&s, &list, &["app:amd64".into(), "app:arm64".into()]).unwrap();
    assert_eq!(raw(&s, &list).unwrap(), bytes);
    // A name in use is not made twice.
    assert!(matches!(create(&s, &list, &[]), Err(IndexError::Exists(_))));
}

#[test]
fn add_replaces_the_same_digest_and_build_replaces_the_same_platform() {
    let (_t, s) = store();
    image(&s, "a:1", "freebsd", "amd64");
    let b = image(&s, "b:1", "freebsd", "amd64");
    let list = ImageName::parse("l:1").unwrap();
    let add_opts = AddOptions::default();
    assert!(matches!(
        add(&s, &list, "a:1", &add_opts, false),
        Err(IndexError::NotFound(_))
    ));
    add(&s, &list, "a:1", &add_opts, true).unwrap();
    add(&s, &list, "a:1", &add_opts, false).unwrap();
    assert_eq!(platforms(&s, &list), ["freebsd/amd64"]);
    // `manifest add` keeps both: the push check refuses the list.
    add(&s, &list, "b:1", &add_opts, false).unwrap();
    assert_eq!(platforms(&s, &list), ["freebsd/amd64", "freebsd/amd64"]);
    let err = check(&s, &list).unwrap_err();
    assert!(matches!(err, IndexError::DuplicatePlatform { .. }), "{err}");
    assert!(err.to_string().contains("freebsd/amd64"), "{err}");
    assert!(err.is_user_error());
    // `build --manifest` replaces the platform's entry.
    let by_platform = AddOptions {
        replace_platform: true,
        ..AddOptions::default()
    };
    add(&s, &list, "b:1", &by_platform, false).unwrap();
    let c = children(&s, &list).unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].digest, b);
    check(&s, &list).unwrap();
}

#[test]
fn platform_and_annotations_given_win() {
    let (_t, s) = store();
    image(&s, "a:1", "freebsd", "amd64");
    let list = ImageName::parse("l:1").unwrap();
    let opts = AddOptions {
        platform: Some(Platform::parse("freebsd/arm64/v8").unwrap()),
        annotations: [("org.example.k".to_string(), "v".to_string())].into(),
        replace_platform: false,
    };
    add(&s, &list, "a:1", &opts, true).unwrap();
    assert_eq!(platforms(&s, &list), ["freebsd/arm64/v8"]);
    let (_, index) = read(&s, &list).unwrap();
    let a = index.manifests()[0].annotations().clone().unwrap();
    assert_eq!(a.get("org.example.k").map(String::as_str), Some("v"));
}

#[test]
fn remove_by_digest_prefix_or_image_and_missing_children_are_named() {
    let (_t, s) = store();
    let a = image(&s, "a:1", "freebsd", "amd64");
    image(&s, "b:1", "freebsd", "arm64");
    let list = ImageName::parse("l:1").unwrap();
    create(&s, &list, &["a:1".into(), "b:1".into()]).unwrap();
    remove(&s, &list, "b:1").unwrap();
    assert_eq!(platforms(&s, &list), ["freebsd/amd64"]);
    assert!(matches!(
        remove(&s, &list, "b:1"),
        Err(IndexError::NoSuchEntry { .. })
    ));
    // A layer gone from the store: named with the platform.
    let bytes = s.read_blob(&a, MAX_DOCUMENT).unwrap();
    let m: ImageManifest = serde_json::from_slice(&bytes).unwrap();
    let layer = descriptor_digest(&m.layers()[0]).unwrap();
    std::fs::remove_file(s.blob_path(&layer)).unwrap();
    let err = check(&s, &list).unwrap_err();
    assert!(matches!(err, IndexError::MissingChild { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("freebsd/amd64") && text.contains(&layer.to_string()),
        "{text}"
    );
    remove(&s, &list, &a.hex()[..8]).unwrap();
    assert!(children(&s, &list).unwrap().is_empty());
    // A list is not an image, and an image is not a list.
    assert!(matches!(
        children(&s, &ImageName::parse("a:1").unwrap()),
        Err(IndexError::NotAList { .. })
    ));
}
