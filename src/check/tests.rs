use super::*;

fn corrupt(images: &[&str]) -> Finding {
    let mut f = Finding::damaged(
        "corrupt-blob",
        "blob sha256:ab is corrupt",
        "/s/blobs/sha256/ab",
    )
    .action("`jbuild check --repair` deletes it")
    .fix(Fix::DeleteCorruptBlob(Digest::of(b"x")));
    f.images = images.iter().map(|s| s.to_string()).collect();
    f
}

fn tmp() -> Finding {
    Finding::reclaimable(
        "tmp-file",
        "a blob an interrupted pull was writing",
        "/s/.jbuild/tmp/blob-1",
        Fix::RemovePath {
            path: "/s/.jbuild/tmp/blob-1".into(),
            guard: Guard::Store,
        },
    )
    .bytes(3)
}

#[test]
fn a_clean_report_is_one_sound_line() {
    let r = Report {
        summary: Summary {
            images: 2,
            blobs: 7,
            blob_bytes: 3 * 1024 * 1024,
            snapshots: 4,
        },
        ..Report::default()
    };
    assert!(!r.is_damaged());
    assert_eq!(
        r.summary_line(),
        "store: 2 images, 7 blobs (3.0 MiB), 4 snapshots: all sound"
    );
    let j = r.to_json();
    assert_eq!(j["sound"], true);
    assert_eq!(j["damaged"].as_array().unwrap().len(), 0);
    assert_eq!(j["reclaimable"].as_array().unwrap().len(), 0);
    assert_eq!(j["pending"].as_array().unwrap().len(), 0);
}

#[test]
fn severities_are_counted_and_split_in_json() {
    let mut r = Report::default();
    r.push(tmp());
    assert!(!r.is_damaged());
    assert!(
        r.summary_line()
            .ends_with("no damage; 1 reclaimable (`jbuild check --repair` removes it)"),
        "{}",
        r.summary_line()
    );
    r.push(corrupt(&["web:1", "base:2"]));
    r.push(tmp());
    assert!(r.is_damaged());
    assert!(
        r.summary_line().ends_with(": 1 damaged, 2 reclaimable"),
        "{}",
        r.summary_line()
    );
    let j = r.to_json();
    assert_eq!(j["sound"], false);
    let d = &j["damaged"][0];
    assert_eq!(d["kind"], "corrupt-blob");
    assert_eq!(d["where"], "/s/blobs/sha256/ab");
    assert_eq!(d["images"], serde_json::json!(["web:1", "base:2"]));
    assert_eq!(d["severity"], "damaged");
    assert!(d.get("fix").is_none(), "the fix is internal: {d}");
    assert_eq!(j["reclaimable"].as_array().unwrap().len(), 2);
    assert_eq!(j["reclaimable"][0]["bytes"], 3);
    assert!(
        j["reclaimable"][0].get("images").is_none(),
        "empty lists are left out"
    );
}

/// An unused layer, pending if `adding`.
fn unused(adding: bool) -> Finding {
    Finding::reclaimable(
        "unused-layer",
        "unpacked layer `chain-ab` is not used by any image in the store",
        "dir snapshot chain-ab",
        Fix::RemoveSnapshot("chain-ab".into()),
    )
    .pending_if(adding)
}

#[test]
fn pending_is_neither_damage_nor_reclaimable() {
    assert_eq!(unused(false).severity, Severity::Reclaimable);
    let mut r = Report::default();
    r.push(unused(true));
    r.push(unused(true));
    assert!(!r.is_damaged());
    assert_eq!(r.reclaimable().count(), 0);
    assert!(
        r.summary_line()
            .ends_with(": no damage; 2 pending (other jbuild processes are adding content)"),
        "{}",
        r.summary_line()
    );
    let text = unused(true).to_text();
    assert!(
        text.starts_with("pending: unpacked layer `chain-ab`"),
        "{text}"
    );
    assert!(
        text.contains("do: nothing now: other jbuild processes are adding content"),
        "{text}"
    );
    // Repair still sees the fix, to say why it leaves the layer.
    assert_eq!(
        unused(true).fix,
        Some(Fix::RemoveSnapshot("chain-ab".into()))
    );
    r.push(tmp());
    assert!(
        r.summary_line().ends_with(
            ": no damage; 1 reclaimable (`jbuild check --repair` removes it); \
             2 pending (other jbuild processes are adding content)"
        ),
        "{}",
        r.summary_line()
    );
    r.push(corrupt(&[]));
    assert!(
        r.summary_line()
            .ends_with(": 1 damaged, 1 reclaimable, 2 pending"),
        "{}",
        r.summary_line()
    );
    let j = r.to_json();
    assert_eq!(j["pending"].as_array().unwrap().len(), 2);
    assert_eq!(j["pending"][0]["severity"], "pending");
    assert_eq!(j["pending"][0]["kind"], "unused-layer");
    assert_eq!(j["reclaimable"].as_array().unwrap().len(), 1);
}

#[test]
fn text_names_what_where_images_and_what_to_do() {
    let text = corrupt(&["web:1"]).to_text();
    assert_eq!(
        text,
        "damaged: blob sha256:ab is corrupt\n  where: /s/blobs/sha256/ab\n  images: web:1\n  do: `jbuild check --repair` deletes it"
    );
    let text = tmp().to_text();
    assert!(
        text.starts_with("reclaimable: a blob an interrupted pull"),
        "{text}"
    );
    assert!(
        text.ends_with("do: `jbuild check --repair` removes it"),
        "{text}"
    );
    assert!(!text.contains("images:"), "{text}");
}

mod store_walk {
    use super::super::store;
    use super::*;
    use crate::store::{canonical_json, oci_digest, ImageName, Store};
    use oci_spec::image::{Descriptor, ImageIndexBuilder, ImageManifestBuilder, MediaType};

    fn put(s: &Store, mt: MediaType, bytes: &[u8]) -> Descriptor {
        let (d, n) = s.put_bytes(bytes).unwrap();
        Descriptor::new(mt, n, oci_digest(&d))
    }

    /// An image with `layers` layers whose config lists `diff_ids` diff IDs.
    fn image(s: &Store, tag: &str, layers: usize, diff_ids: usize) -> Descriptor {
        let ids: Vec<String> = (0..diff_ids)
            .map(|i| Digest::of(format!("{tag}{i}").as_bytes()).to_string())
            .collect();
        let config = format!(
            r#"{{"architecture":"amd64","os":"freebsd","rootfs":{{"type":"layers","diff_ids":{}}}}}"#,
            serde_json::to_string(&ids).unwrap()
        );
        let config = put(s, MediaType::ImageConfig, config.as_bytes());
        let layers = (0..layers)
            .map(|i| {
                put(
                    s,
                    MediaType::ImageLayerGzip,
                    format!("{tag} layer {i}").as_bytes(),
                )
            })
            .collect::<Vec<_>>();
        let m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(config)
            .layers(layers)
            .build()
            .unwrap();
        put(s, MediaType::ImageManifest, &canonical_json(&m))
    }

    fn run(s: &Store) -> (Report, Facts) {
        let mut r = Report::default();
        let facts = store::check(s.path(), &Adding::for_store(s.path(), false), &mut r).unwrap();
        (r, facts)
    }

    fn kinds(r: &Report) -> Vec<(Severity, &'static str)> {
        let mut k: Vec<_> = r.findings.iter().map(|f| (f.severity, f.kind)).collect();
        k.sort_by_key(|(s, k)| (*s == Severity::Reclaimable, *k));
        k
    }

    /// The blobs the first walk found unused are settled after asking
    /// about the lock: all pending while a process holds it; once it is
    /// free, those an image has been named with since are dropped.
    #[test]
    fn unreferenced_blobs_are_settled_after_asking_about_the_lock() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let (loose, n) = s.put_bytes(b"nobody uses me\n").unwrap();
        // As a pull between the first walk and the settling: its blobs
        // were stored unnamed, and it named its image meanwhile.
        let named = image(&s, "named", 1, 1);
        let manifest = crate::store::descriptor_digest(&named).unwrap();
        let candidates = vec![(&loose, &n), (&manifest, &n)];
        let adding = Adding::for_store(s.path(), false);

        let pin = crate::store::StoreLock::shared(&s).unwrap();
        assert!(adding.now());
        let (pending, left) = store::settle_unreferenced(&s, &adding, candidates.clone());
        assert!(pending);
        assert_eq!(left.len(), 2);
        s.tag(&ImageName::parse("named:1").unwrap(), &named)
            .unwrap();
        drop(pin);

        assert!(!adding.now());
        let (pending, left) = store::settle_unreferenced(&s, &adding, candidates);
        assert!(!pending);
        assert_eq!(left, vec![(&loose, &n)]);
        // Holding the lock itself (`--repair`), nobody else is adding.
        let _held = crate::store::StoreLock::try_exclusive(&s).unwrap().unwrap();
        assert!(!Adding::for_store(s.path(), true).now());
    }

    #[test]
    fn nested_indexes_are_walked_and_a_missing_manifest_names_the_index() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let amd = image(&s, "amd", 2, 2);
        let arm = image(&s, "arm", 1, 1);
        let idx = ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(vec![amd, arm.clone()])
            .build()
            .unwrap();
        let idx = put(&s, MediaType::ImageIndex, &canonical_json(&idx));
        s.tag(&ImageName::parse("multi:1").unwrap(), &idx).unwrap();
        s.add_untagged(&image(&s, "loose", 1, 1)).unwrap();
        let (r, facts) = run(&s);
        assert_eq!(kinds(&r), vec![], "{:#?}", r.findings);
        assert!(facts.walk_complete);
        assert_eq!((r.summary.images, r.summary.blobs), (2, 11));

        // The arm manifest goes: its config and layer are unknown, not unused.
        s.remove_blob(&crate::store::descriptor_digest(&arm).unwrap())
            .unwrap();
        let (r, facts) = run(&s);
        assert!(!facts.walk_complete);
        assert_eq!(kinds(&r), vec![(Severity::Damaged, "missing-blob")]);
        let f = &r.findings[0];
        assert_eq!(f.images, vec!["multi:1".to_string()]);
        assert!(f.what.starts_with("manifest sha256:"), "{}", f.what);
        assert!(
            f.action.contains("jbuild pull") && f.action.contains("multi:1"),
            "{}",
            f.action
        );
        assert!(
            r.notes.iter().any(|n| n.contains("not counted")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn layer_count_size_and_foreign_files_are_damage() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let m = image(&s, "short", 2, 1);
        s.tag(&ImageName::parse("short:1").unwrap(), &m).unwrap();
        let mut wrong_size = image(&s, "sized", 1, 1);
        wrong_size.set_size(wrong_size.size() + 1);
        s.tag(&ImageName::parse("sized:1").unwrap(), &wrong_size)
            .unwrap();
        std::fs::write(t.path().join("blobs/sha256/notes.txt"), "mine").unwrap();
        let (r, _) = run(&s);
        assert_eq!(
            kinds(&r),
            vec![
                (Severity::Damaged, "layer-count"),
                (Severity::Damaged, "not-a-blob"),
                (Severity::Damaged, "size-mismatch"),
            ],
            "{:#?}",
            r.findings
        );
        let count = r.findings.iter().find(|f| f.kind == "layer-count").unwrap();
        assert_eq!(count.images, vec!["short:1".to_string()]);
        assert!(
            count.what.contains("2 layers") && count.what.contains("1 diff IDs"),
            "{}",
            count.what
        );
    }

    #[test]
    fn a_subject_the_same_index_lists_is_checked_as_an_image() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let subject = image(&s, "subject", 2, 2);
        let empty = put(&s, MediaType::EmptyJSON, b"{}");
        let referrer = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(empty)
            .layers(vec![])
            .subject(subject.clone())
            .build()
            .unwrap();
        let referrer = put(&s, MediaType::ImageManifest, &canonical_json(&referrer));
        // The referrer first: its subject is met before the index's entry.
        let idx = ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(vec![referrer, subject])
            .build()
            .unwrap();
        let idx = put(&s, MediaType::ImageIndex, &canonical_json(&idx));
        s.tag(&ImageName::parse("signed:1").unwrap(), &idx).unwrap();
        let layer = Digest::of(b"subject layer 0");
        s.remove_blob(&layer).unwrap();
        let (r, facts) = run(&s);
        assert!(facts.walk_complete);
        assert_eq!(
            kinds(&r),
            vec![(Severity::Damaged, "missing-blob")],
            "the subject's config and layers are reached: {:#?}",
            r.findings
        );
        assert_eq!(r.findings[0].images, vec!["signed:1".to_string()]);
        assert_eq!(
            r.findings[0].location,
            s.blob_path(&layer).display().to_string()
        );
    }

    #[test]
    fn a_corrupt_blob_nobody_uses_is_only_reclaimable() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let (d, _) = s.put_bytes(b"orphan").unwrap();
        std::fs::write(s.blob_path(&d), b"0rphan").unwrap();
        let (r, _) = run(&s);
        assert_eq!(kinds(&r), vec![(Severity::Reclaimable, "corrupt-blob")]);
        assert_eq!(r.findings[0].fix, Some(Fix::DeleteCorruptBlob(d)));
        assert!(
            r.findings[0].what.ends_with("(no image uses it)"),
            "{}",
            r.findings[0].what
        );
    }
}

mod check_and_repair {
    use super::*;
    use crate::config::Paths;
    use crate::store::{Store, StoreLock};

    #[test]
    fn repairs_while_it_makes_progress_and_says_what_it_left() {
        let t = tempfile::tempdir().unwrap();
        let paths = Paths::at(t.path().to_path_buf());
        let store = Store::open(&paths.store()).unwrap();
        let (d, _) = store.put_bytes(b"nobody uses me\n").unwrap();
        let inputs = Inputs {
            paths: &paths,
            snapshotter: None,
            store_lock_held: false,
            deep: false,
        };

        // Without the store lock the blob is left, once: no pass after one
        // that changed nothing.
        let (report, repaired) = check_and_repair(&inputs, None).unwrap();
        assert_eq!(
            repaired,
            vec![Repaired::Left(
                "left 1 unreferenced blobs: other jbuild processes are adding content; run `jbuild check --repair` again when they are done".into()
            )]
        );
        assert!(!repaired[0].made_progress());
        assert_eq!(report.reclaimable().count(), 1);
        assert!(store.has_blob(&d));

        let lock = StoreLock::try_exclusive(&store).unwrap().unwrap();
        let (report, repaired) = check_and_repair(&inputs, Some(&lock)).unwrap();
        assert_eq!(
            repaired,
            vec![Repaired::Done(format!(
                "removed unreferenced blob {d} (15 B)"
            ))]
        );
        assert!(repaired[0].made_progress());
        assert_eq!(report.findings.len(), 0, "{:#?}", report.findings);
        assert!(!store.has_blob(&d));
    }
}
