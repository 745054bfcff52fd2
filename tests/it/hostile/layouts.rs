//! An `oci:DIR` as hostile input, and as a place written into: nothing in
//! it is followed. A blob that is a symlink to a host file is refused (and
//! no error says that file's size or digest); so is `blobs` or
//! `index.json` as a symlink, a device in place of `index.json`, or an
//! index larger than the 16 MiB any layout's index may have, before a
//! byte of it is read. `export … oci:DIR` never writes through a symlink
//! planted in DIR. Before, three imports copied any root-readable file
//! into the store (the first two printing its size, then its digest), a
//! 1 GiB `index.json` cost 1 GiB of memory, and `blobs -> elsewhere` had
//! an export write its blobs elsewhere.

use super::{fails_with, succeeded, text, Home};
use crate::support::hostile::{documents, Layer, TAR};
use crate::support::limits::{run_measured_capped, Measured};
use crate::support::registry::{run_bounded, LIMIT};
use jbuild::digest::Digest;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Peak RSS a refused input may reach (the debug binary starts near
/// 28 MiB), as for every refused document.
pub(super) const MAX_RSS_KIB: i64 = 64 << 10;
/// Address space any measured run here may take: the code before the
/// bounds fails to allocate instead of taking the machine's memory.
pub(super) const CAP: u64 = 4 << 30;
/// How long a refused input may take (they take well under a second; a
/// run that waits on a FIFO is stopped here and fails the test).
pub(super) const QUICK: Duration = Duration::from_secs(30);

/// What a host file the layout must not reach holds: never printed, never
/// stored.
pub(super) const SECRET: &[u8] = b"root:$6$canary-5e2a7c-never-read:19000:0:99999:7:::\n";

/// An OCI layout of one image `v1` (a config and one layer), written by
/// the test byte by byte.
pub(super) struct Layout {
    pub dir: PathBuf,
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
    pub layer: Vec<u8>,
}

impl Layout {
    /// A layout at `dir` whose one layer the manifest describes as
    /// `layer` (size and digest); the layer's file is written only when
    /// `store_layer` (else the test puts something else in its place).
    pub fn new(dir: &Path, layer: &[u8], store_layer: bool) -> Layout {
        let diff = Digest::of(layer);
        let (config, manifest) =
            documents(&[Layer::raw(layer.to_vec(), TAR, diff.clone())], &[diff]);
        fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
        fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
        let l = Layout {
            dir: dir.to_path_buf(),
            config,
            manifest,
            layer: layer.to_vec(),
        };
        fs::write(l.blob(&l.config), &l.config).unwrap();
        fs::write(l.blob(&l.manifest), &l.manifest).unwrap();
        if store_layer {
            fs::write(l.blob(layer), layer).unwrap();
        }
        fs::write(dir.join("index.json"), l.index()).unwrap();
        l
    }

    /// Where the blob of `bytes` is.
    pub fn blob(&self, bytes: &[u8]) -> PathBuf {
        self.dir.join("blobs/sha256").join(Digest::of(bytes).hex())
    }

    pub fn index(&self) -> String {
        format!(
            r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{}","size":{},"annotations":{{"org.opencontainers.image.ref.name":"v1"}}}}]}}"#,
            Digest::of(&self.manifest),
            self.manifest.len()
        )
    }

    /// `oci:DIR:v1`.
    pub fn location(&self) -> String {
        format!("oci:{}:v1", self.dir.display())
    }
}

/// Every entry under `dir`: its kind and, for a file, its bytes; what
/// must be the same before and after a run that could write there.
pub(super) fn tree(dir: &Path) -> BTreeMap<PathBuf, (String, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let kind = super::kind(&p);
            let bytes = match kind {
                "regular file" => fs::read(&p).unwrap(),
                "directory" => {
                    todo.push(p.clone());
                    vec![]
                }
                "symlink" => fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
                _ => vec![],
            };
            out.insert(
                p.strip_prefix(dir).unwrap().to_path_buf(),
                (kind.into(), bytes),
            );
        }
    }
    out
}

/// `jbuild import LOCATION NAME`, measured.
fn import(h: &Home, location: &str, name: &str) -> Measured {
    run_measured_capped(h.jbuild().args(["import", location, name]), b"", QUICK, CAP)
}

/// Exit 1 with each of `says`, and none of `never` in what it printed;
/// peak RSS within the bound.
pub(super) fn refused(m: &Measured, says: &[&str], never: &[&str]) {
    eprintln!(
        "exit {:?}, {:.1?}, peak RSS {} KiB",
        m.output.status.code(),
        m.elapsed,
        m.max_rss_kib
    );
    assert_eq!(m.output.status.code(), Some(1), "{}", m.text());
    let all = format!("{}{}", m.stdout(), m.stderr());
    for s in says {
        assert!(all.contains(s), "`{s}` not in:\n{}", m.text());
    }
    for n in never {
        assert!(!all.contains(n), "`{n}` is in:\n{}", m.text());
    }
    assert!(
        m.max_rss_kib <= MAX_RSS_KIB,
        "peak RSS {} KiB:\n{}",
        m.max_rss_kib,
        m.text()
    );
}

/// Whether the store under `h` holds a blob of `bytes`.
fn stored(h: &Home, bytes: &[u8]) -> bool {
    h.path("root/store/blobs/sha256")
        .join(Digest::of(bytes).hex())
        .exists()
}

#[test]
fn a_blob_symlinked_to_a_host_file_is_never_read() {
    let h = Home::new("FROM scratch\n");
    fs::create_dir_all(h.path("host")).unwrap();
    let shadow = h.path("host/shadow");
    fs::write(&shadow, SECRET).unwrap();
    // The size as a mismatch would say it, and the digest.
    let size = format!("got {}", SECRET.len());
    let digest = Digest::of(SECRET).hex().to_string();
    let never = [size.as_str(), digest.as_str(), "canary-5e2a7c"];
    // The third describes the file rightly: its digest is the layer's own
    // name then, which the error names.
    let never_third = [size.as_str(), "canary-5e2a7c"];

    // What the three imports of the review tried, each a layer whose file
    // is a symlink to the host file: described with another size (the
    // error printed the real one), with the real size and another digest
    // (it printed the real digest), then with both right (it copied the
    // file into the store).
    let mut same_size = SECRET.to_vec();
    same_size[0] = b'R';
    for (i, described) in [&b"other"[..], &same_size, SECRET].into_iter().enumerate() {
        let l = Layout::new(&h.path(&format!("lay{i}")), described, false);
        symlink(&shadow, l.blob(described)).unwrap();
        let m = import(&h, &l.location(), &format!("leak:{i}"));
        let blob = format!("blobs/sha256/{}", Digest::of(described).hex());
        let never: &[&str] = if i == 2 { &never_third } else { &never };
        refused(&m, &[&blob, "it is a symlink, not a regular file"], never);
    }
    assert!(!stored(&h, SECRET), "the host file is in the store");

    // `blobs` itself leading to the host: refused where it stands.
    let l = Layout::new(&h.path("lay3"), SECRET, false);
    fs::remove_dir_all(l.dir.join("blobs")).unwrap();
    fs::create_dir_all(h.path("host/sha256")).unwrap();
    for bytes in [&l.config, &l.manifest, &l.layer] {
        fs::write(h.path("host/sha256").join(Digest::of(bytes).hex()), bytes).unwrap();
    }
    symlink(h.path("host"), l.dir.join("blobs")).unwrap();
    let m = import(&h, &l.location(), "leak:3");
    refused(&m, &["`blobs` on the way is a symlink"], &["canary-5e2a7c"]);
    assert!(!stored(&h, SECRET), "the host file is in the store");

    // And the same layout with real files imports.
    let ok = Layout::new(&h.path("good"), b"layer bytes", true);
    let m = import(&h, &ok.location(), "good:1");
    assert!(m.output.status.success(), "{}", m.text());
    assert!(stored(&h, b"layer bytes"));
}

#[test]
fn a_gigabyte_index_or_a_device_in_its_place_is_refused_unread() {
    let h = Home::new("FROM scratch\n");
    // 1 GiB, sparse: costs the test no disk, and jbuild 1 GiB to read.
    let l = Layout::new(&h.path("big"), b"layer", true);
    let index = fs::OpenOptions::new()
        .write(true)
        .open(l.dir.join("index.json"))
        .unwrap();
    index.set_len(1 << 30).unwrap();
    let m = import(&h, &l.location(), "big:1");
    refused(
        &m,
        &[
            "index.json",
            "1073741824 bytes, more than the 16777216 allowed",
        ],
        &[],
    );

    // /dev/zero's device (1, 5) made here in its place, and a symlink to
    // the system's: neither is read at all.
    let z = Layout::new(&h.path("zero"), b"layer", true);
    fs::remove_file(z.dir.join("index.json")).unwrap();
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    mknod(
        &z.dir.join("index.json"),
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o444),
        makedev(1, 5),
    )
    .unwrap();
    let m = import(&h, &z.location(), "zero:1");
    refused(&m, &["index.json", "it is a character device"], &[]);
    fs::remove_file(z.dir.join("index.json")).unwrap();
    symlink("/dev/zero", z.dir.join("index.json")).unwrap();
    let m = import(&h, &z.location(), "zero:1");
    refused(&m, &["index.json", "it is a symlink"], &[]);
    let listed = succeeded(&run_bounded(h.jbuild().arg("images"), LIMIT));
    assert!(
        !listed.contains("big") && !listed.contains("zero"),
        "{listed}"
    );
}

/// `export IMG oci:DIR` into a layout where `blobs`, `blobs/sha256` or
/// `.jbuild` is a symlink to a directory outside: refused, naming it, and
/// the directory outside is byte for byte as it was.
#[test]
fn export_never_writes_through_a_symlink_planted_in_the_layout() {
    let h = Home::new("FROM scratch\nCOPY site/ /srv/\nLABEL app=export\n");
    succeeded(&h.build(&["-q", "-t", "app:1"]));
    let canary = h.path("canary");
    fs::create_dir_all(canary.join("sha256")).unwrap();
    fs::write(canary.join("keep"), "outside the layout\n").unwrap();
    for planted in ["blobs", "blobs/sha256", ".jbuild"] {
        // A layout jbuild wrote, with an image already in it.
        let dir = h.path(&format!("out-{}", planted.replace('/', "-")));
        let dest = format!("oci:{}:first", dir.display());
        succeeded(&run_bounded(
            h.jbuild().args(["export", "app:1", &dest]),
            LIMIT,
        ));
        let place = dir.join(planted);
        fs::remove_dir_all(&place).unwrap();
        symlink(&canary, &place).unwrap();
        let before = tree(&canary);

        let again = format!("oci:{}:second", dir.display());
        let out = run_bounded(h.jbuild().args(["export", "app:1", &again]), LIMIT);
        let shown = format!("{} is a symlink (to {})", place.display(), canary.display());
        fails_with(&out, &[&shown]);
        assert_eq!(
            tree(&canary),
            before,
            "{planted}: written outside:\n{}",
            text(&out.stderr)
        );
    }
}
