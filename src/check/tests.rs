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
