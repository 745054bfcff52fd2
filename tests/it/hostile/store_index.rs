//! The store's own `index.json` has a bound, 16 MiB (some 56,000 names):
//! a larger one is refused before a byte of it is read (before, `tag` on a
//! 200 MB index took 581 MiB), one at the bound is read and rewritten in
//! 64 MiB more than `tag` takes on a small store, and no change may take it
//! past the bound (every reader, `rmi` included, would refuse it then).

use super::layouts::CAP;
use super::{succeeded, Home};
use crate::support::limits::{run_measured_capped, Measured};
use crate::support::registry::LIMIT;

use serde_json::Value;
use std::fs;

/// The bound of docs/security.md.
const MAX_INDEX: usize = 16 << 20;

fn measured(h: &Home, args: &[&str]) -> Measured {
    let m = run_measured_capped(h.jbuild().args(args), b"", LIMIT, CAP);
    eprintln!(
        "{args:?}: exit {:?}, {:.1?}, peak RSS {} KiB",
        m.output.status.code(),
        m.elapsed,
        m.max_rss_kib
    );
    m
}

/// A store with the image `app:1`; its index's path.
fn store() -> (Home, std::path::PathBuf) {
    let h = Home::new("FROM scratch\nCOPY site/ /srv/\nLABEL app=index\n");
    succeeded(&h.build(&["-q", "-t", "app:1"]));
    let index = h.path("root/store/index.json");
    (h, index)
}

#[test]
fn an_index_past_the_bound_is_refused_unread() {
    let (h, index) = store();
    // 200 MB, sparse (the rest of it NUL bytes): reading it costs 200 MB.
    let f = fs::OpenOptions::new().write(true).open(&index).unwrap();
    f.set_len(200_000_000).unwrap();
    let m = measured(&h, &["tag", "app:1", "other:1"]);
    assert_eq!(m.output.status.code(), Some(2), "{}", m.text());
    assert!(
        m.stderr()
            .contains("index.json: it is 200000000 bytes, more than the 16777216 allowed"),
        "{}",
        m.text()
    );
    assert!(m.max_rss_kib <= 64 << 10, "{}", m.text());
    let m = measured(&h, &["check"]);
    assert_eq!(m.output.status.code(), Some(1), "{}", m.text());
    assert!(
        m.stdout()
            .contains("index.json cannot be read: it is 200000000 bytes"),
        "{}",
        m.text()
    );
}

#[test]
fn an_index_at_the_bound_is_read_and_rewritten_in_bounded_memory() {
    let (h, index) = store();
    let small = measured(&h, &["tag", "app:1", "small:1"]);
    assert!(small.output.status.success(), "{}", small.text());

    // As many names of the image as leave room for one more short one.
    let mut doc: Value = serde_json::from_slice(&fs::read(&index).unwrap()).unwrap();
    let entry = doc["manifests"][0].clone();
    let mut size = serde_json::to_vec(&doc).unwrap().len();
    let mut all = doc["manifests"].as_array().unwrap().clone();
    for i in 0.. {
        let mut e = entry.clone();
        e["annotations"]["org.opencontainers.image.ref.name"] =
            format!("localhost:5000/jails/web-{i:06}:14.1").into();
        let more = serde_json::to_vec(&e).unwrap().len() + 1;
        if size + more > MAX_INDEX - 400 {
            break;
        }
        size += more;
        all.push(e);
    }
    let names = all.len();
    doc["manifests"] = all.into();
    let bytes = serde_json::to_vec(&doc).unwrap();
    assert!(bytes.len() > MAX_INDEX - 700 && bytes.len() <= MAX_INDEX - 400);
    fs::write(&index, &bytes).unwrap();

    let big = measured(&h, &["tag", "app:1", "small:2"]);
    assert!(big.output.status.success(), "{}", big.text());
    let over = big.max_rss_kib - small.max_rss_kib;
    eprintln!("{names} names: tag took {over} KiB more than on a small store");
    assert!(over <= 64 << 10, "{over} KiB more:\n{}", big.text());

    // One long name more would pass the bound: refused, and the index
    // stays readable, so names can be removed.
    let long = format!("{}:1", "a/".repeat(120) + "z");
    let m = measured(&h, &["tag", "app:1", &long]);
    assert_eq!(m.output.status.code(), Some(1), "{}", m.text());
    assert!(
        m.stderr()
            .contains("more than the 16 MiB an index may have"),
        "{}",
        m.text()
    );
    let m = measured(&h, &["rmi", "small:2"]);
    assert!(m.output.status.success(), "{}", m.text());
}
