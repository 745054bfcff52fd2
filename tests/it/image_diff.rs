//! `jbuild diff A B`, end to end: two images made here layer by layer
//! (the tests' own tar writer, whiteouts and an opaque directory, a hard
//! link, a changed owner, mode, link target and content, and pkg
//! databases made with pkg's schema), imported from OCI layouts, then
//! compared by the real binary. The reference is what unpacking both
//! images with umoci and comparing the trees gives.

use crate::support::common::{self, jbuild, ok, run};
use crate::support::hostile::{documents, Layer, Tar};
use crate::support::registry::Registry;
use crate::support::tar::{Fields, Header};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use jbuild::digest::Digest;
use rusqlite::{params, Connection};
use serde_json::Value;

const SCHEMA: &str = include_str!("../data/sbom/pkg-local-schema.sql");

/// A pkg database holding `(name, version)` packages, as its bytes.
fn pkg_db(dir: &Path, pkgs: &[(&str, &str)]) -> Vec<u8> {
    let path = dir.join("local.sqlite");
    let _ = fs::remove_file(&path);
    let db = Connection::open(&path).unwrap();
    db.execute_batch(SCHEMA).unwrap();
    for (i, (name, version)) in pkgs.iter().enumerate() {
        db.execute(
            "INSERT INTO packages (id, origin, name, version, comment, desc, arch, maintainer, \
             www, prefix, flatsize, automatic, licenselogic, time) VALUES (?1, ?2, ?3, ?4, 'c', \
             'd', 'FreeBSD:14:amd64', 'ports@FreeBSD.org', 'https://example.org', '/usr/local', \
             1, 0, 1, 1700000000)",
            params![i as i64 + 1, format!("misc/{name}"), name, version],
        )
        .unwrap();
    }
    drop(db);
    fs::read(&path).unwrap()
}

/// A regular file owned by `uid:gid`.
fn owned(tar: Tar, name: &str, uid: u64, content: &[u8]) -> Tar {
    let h = Header::new(&Fields {
        name: name.as_bytes(),
        uid,
        gid: uid,
        size: content.len() as u64,
        mtime: 1_600_000_000,
        ..Fields::default()
    });
    let mut t = tar.raw(h.as_bytes()).raw(content);
    t.bytes.resize(t.bytes.len().div_ceil(512) * 512, 0);
    t
}

/// Writes an OCI layout of `layers` at `dir` (tag `v1`) and imports it
/// into the store at `root` as `name`.
fn import(root: &Path, dir: &Path, name: &str, layers: &[Vec<u8>]) {
    let layers: Vec<Layer> = layers.iter().map(|t| Layer::gzip(t)).collect();
    let diff_ids: Vec<Digest> = layers.iter().map(|l| l.diff_id.clone()).collect();
    let (config, manifest) = documents(&layers, &diff_ids);
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    for bytes in layers
        .iter()
        .map(|l| l.blob.as_slice())
        .chain([config.as_slice(), manifest.as_slice()])
    {
        fs::write(
            dir.join("blobs/sha256").join(Digest::of(bytes).hex()),
            bytes,
        )
        .unwrap();
    }
    fs::write(
        dir.join("index.json"),
        format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{}","size":{},"annotations":{{"org.opencontainers.image.ref.name":"v1"}}}}]}}"#,
            Digest::of(&manifest),
            manifest.len()
        ),
    )
    .unwrap();
    ok(jbuild(root)
        .args(["import", "-q"])
        .arg(format!("oci:{}:v1", dir.display()))
        .arg(name));
}

/// The two base layers both images share: the second removes a file of
/// the first (a whiteout) and adds the pkg database.
fn base(work: &Path) -> [Vec<u8>; 2] {
    let db = pkg_db(
        work,
        &[("curl", "8.9.1"), ("wget", "1.21"), ("zlib", "1.3")],
    );
    let t = Tar::new()
        .dir(b"etc/")
        .file(b"etc/rc.conf", b"x=1\n")
        .file(b"etc/motd", b"hello\n")
        .file(b"etc/gone", b"removed by the next layer\n");
    let first = owned(t, "etc/owned", 0, b"mine\n")
        .dir(b"usr/")
        .dir(b"usr/local/")
        .dir(b"usr/local/bin/")
        .file_mode(b"usr/local/bin/tool", 0o755, b"#!/bin/sh\n")
        .symlink(b"usr/local/bin/t", b"tool")
        .dir(b"usr/local/share/")
        .dir(b"usr/local/share/doc/")
        .file(b"usr/local/share/doc/a", b"a\n")
        .file(b"usr/local/share/doc/b", b"b\n")
        .finish();
    let second = Tar::new()
        .file(b"etc/.wh.gone", b"")
        .dir(b"var/")
        .dir(b"var/db/")
        .dir(b"var/db/pkg/")
        .file(b"var/db/pkg/local.sqlite", &db)
        .finish();
    [first, second]
}

/// Two layers on the base: every kind of change.
fn changes(work: &Path) -> (Vec<u8>, Vec<u8>) {
    let l2 = Tar::new()
        .file(b"etc/.wh.motd", b"")
        .file(b"etc/rc.conf", b"x=22\n")
        .file(b"etc/new.conf", b"new\n")
        .hard_link(b"etc/new-link", b"etc/new.conf")
        .file_mode(b"usr/local/bin/tool", 0o700, b"#!/bin/sh\n")
        .file(b"usr/local/share/doc/.wh..wh..opq", b"")
        .file(b"usr/local/share/doc/c", b"c\n")
        .finish();
    let db = pkg_db(work, &[("curl", "8.10.0"), ("jq", "1.7"), ("zlib", "1.3")]);
    let l3 = owned(Tar::new(), "etc/owned", 1001, b"mine\n")
        .symlink(b"usr/local/bin/t", b"tool2")
        .file(b"var/db/pkg/local.sqlite", &db)
        .finish();
    (l2, l3)
}

struct World {
    tmp: tempfile::TempDir,
}

impl World {
    /// The store with `a:1` (the two base layers) and `b:1` (the base and
    /// the changes, four layers).
    fn new() -> World {
        let w = World {
            tmp: tempfile::tempdir().unwrap(),
        };
        let work = w.tmp.path();
        let [b1, b2] = base(work);
        let (l2, l3) = changes(work);
        import(&w.root(), &work.join("a"), "a:1", &[b1.clone(), b2.clone()]);
        import(&w.root(), &work.join("b"), "b:1", &[b1, b2, l2, l3]);
        w
    }
    fn root(&self) -> std::path::PathBuf {
        self.tmp.path().join("root")
    }
    fn diff(&self, args: &[&str]) -> (i32, String, String) {
        diff_in(&self.root(), args)
    }
}

/// `jbuild diff ARGS` with the state root `root`: exit code, stdout, stderr.
fn diff_in(root: &Path, args: &[&str]) -> (i32, String, String) {
    let out = run(jbuild(root).arg("diff").args(args));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn diff_reports_exactly_the_changes_of_the_layers_with_whiteouts_and_packages() {
    let w = World::new();
    let (code, stdout, stderr) = w.diff(&["a:1", "b:1"]);
    assert_eq!(code, 1, "differences exit 1: {stdout}{stderr}");
    assert!(stderr.is_empty(), "differences are not an error: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    let (db_line, rest): (Vec<&str>, Vec<&str>) = lines
        .iter()
        .partition(|l| l.starts_with("C /var/db/pkg/local.sqlite"));
    assert_eq!(db_line.len(), 1, "{stdout}");
    assert!(db_line[0].ends_with("content)"), "{stdout}");
    assert_eq!(
        rest,
        [
            "D /etc/motd",
            "A /etc/new-link",
            "A /etc/new.conf",
            "C /etc/owned  (owner 0:0 → 1001:1001)",
            "C /etc/rc.conf  (size 4 → 5, content)",
            "C /usr/local/bin/t  (target tool → tool2)",
            "C /usr/local/bin/tool  (mode 0755 → 0700)",
            "D /usr/local/share/doc/a",
            "D /usr/local/share/doc/b",
            "A /usr/local/share/doc/c",
            "↑ curl 8.9.1 → 8.10.0",
            "+ jq 1.7",
            "- wget 1.21",
        ],
        "{stdout}"
    );

    // The same in JSON, and the packages alone.
    let (code, json, _) = w.diff(&["--format", "json", "a:1", "b:1"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        strings(&v["files"]["added"]),
        ["/etc/new-link", "/etc/new.conf", "/usr/local/share/doc/c"]
    );
    assert_eq!(
        strings(&v["files"]["removed"]),
        [
            "/etc/motd",
            "/usr/local/share/doc/a",
            "/usr/local/share/doc/b"
        ]
    );
    assert_eq!(v["files"]["changed"].as_array().unwrap().len(), 5, "{json}");
    let pk = &v["packages"];
    assert_eq!(
        (
            &pk["added"],
            &pk["removed"],
            &pk["upgraded"],
            &pk["downgraded"]
        ),
        (
            &Value::from(1),
            &Value::from(1),
            &Value::from(1),
            &Value::from(0)
        ),
        "{json}"
    );
    assert_eq!(pk["changes"][0]["change"], "upgraded", "{json}");
    assert_eq!(pk["changes"][0]["from"], "8.9.1");

    let (code, only, _) = w.diff(&["--packages", "a:1", "b:1"]);
    assert_eq!(code, 1);
    assert_eq!(
        only.lines().collect::<Vec<_>>(),
        ["↑ curl 8.9.1 → 8.10.0", "+ jq 1.7", "- wget 1.21"]
    );
}

#[test]
fn an_image_compared_with_itself_is_the_same_and_trouble_exits_2() {
    let w = World::new();
    let (code, stdout, stderr) = w.diff(&["b:1", "b:1"]);
    assert_eq!((code, stdout.as_str()), (0, ""), "{stderr}");
    let (code, _, stderr) = w.diff(&["a:1", "nosuch:1"]);
    assert_eq!(code, 2, "as diff(1), trouble is 2: {stderr}");
    assert!(stderr.contains("nosuch:1"), "{stderr}");
}

fn strings(x: &Value) -> Vec<String> {
    x.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The reference: both images unpacked by umoci, the trees compared.
#[test]
fn diff_agrees_with_comparing_the_unpacked_trees() {
    let w = World::new();
    let work = w.tmp.path().join("unpacked");
    fs::create_dir_all(&work).unwrap();
    let (_, ra) = common::export_unpacked(&w.root(), "a:1", &work);
    let (_, rb) = common::export_unpacked(&w.root(), "b:1", &work);
    let (ta, tb) = (common::snapshot_tree(&ra), common::snapshot_tree(&rb));
    let keys = |t: &BTreeMap<String, common::Entry>| -> BTreeSet<String> {
        t.keys().map(|k| format!("/{k}")).collect()
    };
    let (ka, kb) = (keys(&ta), keys(&tb));
    let want_added: BTreeSet<String> = kb.difference(&ka).cloned().collect();
    let want_removed: BTreeSet<String> = ka.difference(&kb).cloned().collect();
    // Rootless unpacking drops owners: compare the rest.
    let want_changed: BTreeSet<String> = ka
        .intersection(&kb)
        .filter(|k| {
            let (x, y) = (&ta[&k[1..]], &tb[&k[1..]]);
            (x.kind, x.mode, &x.content) != (y.kind, y.mode, &y.content)
        })
        .cloned()
        .collect();

    let (_, json, _) = w.diff(&["--format", "json", "a:1", "b:1"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    let set = |x: &Value| -> BTreeSet<String> { strings(x).into_iter().collect() };
    assert_eq!(set(&v["files"]["added"]), want_added);
    assert_eq!(set(&v["files"]["removed"]), want_removed);
    let changed: BTreeSet<String> = v["files"]["changed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["fields"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["field"] != "owner")
        })
        .map(|c| c["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(changed, want_changed);
}

/// The files and packages parts of a JSON comparison (its `a` and `b`
/// name the images as written).
fn parts(json: &str) -> (Value, Value, Value) {
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    (
        v["files"].clone(),
        v["packages"].clone(),
        v["without_database"].clone(),
    )
}

/// Both images pushed to a Distribution registry: `docker://` references,
/// both remote (from a store that holds neither) and one remote against a
/// stored one, compare exactly as the stored images do, in both formats;
/// the fetched blobs do not stay in the store.
#[test]
fn docker_references_compare_as_the_stored_images_do() {
    let w = World::new();
    let reg = Registry::start();
    let mut remote = Vec::new();
    for name in ["a:1", "b:1"] {
        let to = format!("{}/diff/{name}", reg.host());
        ok(jbuild(&w.root()).args(["push", "-q", name, &to]));
        remote.push(format!("docker://{to}"));
    }
    let (ra, rb) = (remote[0].as_str(), remote[1].as_str());
    let elsewhere = w.tmp.path().join("elsewhere");

    let (code, want_table, stderr) = w.diff(&["a:1", "b:1"]);
    assert_eq!(code, 1, "{stderr}");
    let (code, want_json, stderr) = w.diff(&["--format", "json", "a:1", "b:1"]);
    assert_eq!(code, 1, "{stderr}");
    for (root, a, b) in [
        (elsewhere.as_path(), ra, rb),
        (w.root().as_path(), "a:1", rb),
        (w.root().as_path(), ra, "b:1"),
    ] {
        let (code, table, stderr) = diff_in(root, &[a, b]);
        assert_eq!(
            (code, table.as_str()),
            (1, want_table.as_str()),
            "{a} {b}: {stderr}"
        );
        let (code, json, stderr) = diff_in(root, &["--format", "json", a, b]);
        assert_eq!(code, 1, "{a} {b}: {stderr}");
        assert_eq!(parts(&json), parts(&want_json), "{a} {b}");
        let (code, only, stderr) = diff_in(root, &["--packages", a, b]);
        assert_eq!(
            (code, only.lines().collect::<Vec<_>>()),
            (1, vec!["↑ curl 8.9.1 → 8.10.0", "+ jq 1.7", "- wget 1.21"]),
            "{a} {b}: {stderr}"
        );
    }
    let (code, same, stderr) = diff_in(&elsewhere, &[rb, rb]);
    assert_eq!((code, same.as_str()), (0, ""), "{stderr}");
    let (code, same, stderr) = diff_in(&w.root(), &["b:1", rb]);
    assert_eq!((code, same.as_str()), (0, ""), "{stderr}");

    // Nothing fetched was kept: the store that held neither has no blob
    // and no image; the other has the blobs it had.
    let blobs = |root: &Path| -> BTreeSet<String> {
        match fs::read_dir(root.join("store/blobs/sha256")) {
            Ok(d) => d
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
            Err(_) => BTreeSet::new(),
        }
    };
    assert_eq!(blobs(&elsewhere), BTreeSet::new());
    let index = fs::read_to_string(elsewhere.join("store/index.json")).unwrap();
    let v: Value = serde_json::from_str(&index).unwrap();
    assert_eq!(v["manifests"], serde_json::json!([]), "{index}");

    // A reference the registry does not have is trouble, named.
    let missing = format!("docker://{}/diff/nosuch:1", reg.host());
    let (code, _, stderr) = diff_in(&elsewhere, &[ra, &missing]);
    assert_eq!(code, 2, "as diff(1), trouble is 2: {stderr}");
    assert!(stderr.contains("nosuch"), "{stderr}");
}
