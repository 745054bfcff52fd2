//! `jbuild sbom`, end to end: images built by `jbuild build` with a pkg(8)
//! database made here from pkg's own schema
//! (`tests/data/sbom/pkg-local-schema.sql`) copied to
//! `/var/db/pkg/local.sqlite`, then documented by the real binary. The SPDX
//! output is checked against the SPDX 2.3 JSON schema in
//! `../shared/schemas/spdx-2.3/` with Debian's python3-jsonschema; the
//! CycloneDX output field by field against the 1.5 specification. Hostile
//! databases (not SQLite, pkg's tables missing, a view in a table's place,
//! a value past the limit) fail with exit 1, naming the image and the file.

use crate::support::common;
use jbuild::blame::Blame;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{jbuild, ok, run, static_busybox};
use rusqlite::{params, Connection};
use serde_json::Value;

const SCHEMA: &str = include_str!("../data/sbom/pkg-local-schema.sql");

/// One package row and what hangs off it.
struct Pkg<'a> {
    name: &'a str,
    version: &'a str,
    origin: &'a str,
    licenses: &'a [&'a str],
    /// pkg's licenselogic: 1 single, b'|' or, b'&' and.
    logic: i64,
    deps: &'a [&'a str],
    digest: Option<String>,
}

/// The packages every test image starts with.
fn base_packages() -> Vec<Pkg<'static>> {
    vec![
        Pkg {
            name: "curl",
            version: "8.9.1",
            origin: "ftp/curl",
            licenses: &["MIT"],
            logic: 1,
            deps: &["libnghttp2", "ca_root_nss"],
            digest: Some(format!("2$1${}", "ab".repeat(32))),
        },
        Pkg {
            name: "libnghttp2",
            version: "1.62.1",
            origin: "www/libnghttp2",
            licenses: &["MIT"],
            logic: 1,
            deps: &[],
            // pkg's own base32 encoding: no checksum jbuild can claim.
            digest: Some("2$0$6kzr1h3ghz1bhgc5fp7cnuzn1mpq5uqegrnj5zmpxdmqs9fz8bpy".into()),
        },
        Pkg {
            name: "ca_root_nss",
            version: "3.103",
            origin: "security/ca_root_nss",
            licenses: &["MPL20"],
            logic: 1,
            deps: &[],
            digest: None,
        },
        Pkg {
            name: "perl5",
            version: "5.36.3_2",
            origin: "lang/perl5.36",
            licenses: &["ART10", "GPLv1+"],
            logic: b'|' as i64,
            deps: &[],
            digest: None,
        },
        Pkg {
            name: "gtk+",
            version: "2.24.33_1,1",
            origin: "x11-toolkits/gtk20",
            licenses: &["LGPL20", "PD"],
            logic: b'&' as i64,
            deps: &["perl5"],
            digest: None,
        },
    ]
}

/// A pkg database at `path` holding `pkgs`, made with pkg's schema.
fn make_db(path: &Path, pkgs: &[Pkg<'_>]) {
    let _ = fs::remove_file(path);
    let db = Connection::open(path).unwrap();
    db.execute_batch(SCHEMA).unwrap();
    let mut license_ids: BTreeMap<&str, i64> = BTreeMap::new();
    for (i, p) in pkgs.iter().enumerate() {
        let id = i as i64 + 1;
        db.execute(
            "INSERT INTO packages (id, origin, name, version, comment, desc, arch, maintainer, \
             www, prefix, flatsize, automatic, licenselogic, time, manifestdigest) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'a description', 'FreeBSD:14:amd64', \
             'ports@FreeBSD.org', ?6, '/usr/local', 1000, 0, ?7, 1700000000, ?8)",
            params![
                id,
                p.origin,
                p.name,
                p.version,
                format!("the {} package", p.name),
                format!("https://example.org/{}", p.name),
                p.logic,
                p.digest
            ],
        )
        .unwrap();
        for l in p.licenses {
            let next = license_ids.len() as i64 + 1;
            let lid = *license_ids.entry(l).or_insert_with(|| {
                db.execute(
                    "INSERT INTO licenses (id, name) VALUES (?1, ?2)",
                    params![next, l],
                )
                .unwrap();
                next
            });
            db.execute(
                "INSERT INTO pkg_licenses (package_id, license_id) VALUES (?1, ?2)",
                params![id, lid],
            )
            .unwrap();
        }
    }
    for (i, p) in pkgs.iter().enumerate() {
        for d in p.deps {
            let dep = pkgs.iter().find(|q| q.name == *d).unwrap();
            db.execute(
                "INSERT INTO deps (origin, name, version, package_id) VALUES (?1, ?2, ?3, ?4)",
                params![dep.origin, dep.name, dep.version, i as i64 + 1],
            )
            .unwrap();
        }
    }
}

const FREEBSD_VERSION: &str = "#!/bin/sh\n# freebsd-version(1), as a release ships it\n\
set -e\n\nUSERLAND_VERSION=\"14.1-RELEASE-p5\"\n\n: ${ROOT:=}\n";

/// A state root and a build context of its own.
struct World {
    tmp: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let w = World {
            tmp: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(w.ctx()).unwrap();
        fs::write(w.ctx().join("freebsd-version"), FREEBSD_VERSION).unwrap();
        w
    }
    fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }
    fn ctx(&self) -> PathBuf {
        self.tmp.path().join("ctx")
    }
    fn jbuild(&self) -> Command {
        jbuild(&self.root())
    }
    /// `jbuild build -t tag` of `jailfile` over the context.
    fn build(&self, tag: &str, jailfile: &str) {
        fs::write(self.ctx().join("Jailfile"), jailfile).unwrap();
        ok(self
            .jbuild()
            .args(["build", "-q", "-t", tag])
            .arg(self.ctx()));
    }
    /// An image `tag` whose root has `pkgs` in its pkg database.
    fn image_with(&self, tag: &str, pkgs: &[Pkg<'_>]) {
        make_db(&self.ctx().join("local.sqlite"), pkgs);
        self.build(
            tag,
            "FROM --platform=linux/amd64 scratch\n\
             COPY freebsd-version /bin/freebsd-version\n\
             COPY local.sqlite /var/db/pkg/local.sqlite\n",
        );
    }
    fn sbom(&self, args: &[&str]) -> Value {
        let out = ok(self.jbuild().arg("sbom").args(args));
        serde_json::from_str(&out).unwrap()
    }
    fn sbom_fails(&self, args: &[&str]) -> Output {
        run(self.jbuild().arg("sbom").args(args))
    }
}

fn names_of_spdx(doc: &Value) -> BTreeSet<String> {
    doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["SPDXID"]
                .as_str()
                .unwrap()
                .starts_with("SPDXRef-Package-")
        })
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

fn spdx_package<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["name"] == name
                && p["SPDXID"]
                    .as_str()
                    .unwrap()
                    .starts_with("SPDXRef-Package-")
        })
        .unwrap_or_else(|| panic!("no package {name} in {doc:#}"))
}

/// The schema directory beside the checkout; its absence is a failure.
fn spdx_schema() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/schemas/spdx-2.3");
    let schema = dir.join("spdx-schema.json");
    assert!(
        schema.is_file(),
        "{} is missing: the SPDX 2.3 schema is part of the test set-up",
        schema.display()
    );
    schema.canonicalize().unwrap()
}

/// Debian's python3-jsonschema validates `doc` against the SPDX schema.
fn validate_spdx(doc_path: &Path) -> Output {
    let schema = spdx_schema();
    Command::new("/usr/bin/python3")
        .args(["-m", "jsonschema", "-i"])
        .arg(doc_path)
        .arg(&schema)
        .output()
        .expect("/usr/bin/python3 with python3-jsonschema (tests/run installs it)")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn spdx_lists_exactly_the_installed_packages_and_validates_against_the_schema() {
    let w = World::new();
    w.image_with("web:1", &base_packages());
    let doc = w.sbom(&["web:1"]);

    let want: BTreeSet<String> = base_packages().iter().map(|p| p.name.to_string()).collect();
    assert_eq!(names_of_spdx(&doc), want, "{doc:#}");
    assert_eq!(doc["spdxVersion"], "SPDX-2.3");

    let curl = spdx_package(&doc, "curl");
    assert_eq!(curl["versionInfo"], "8.9.1");
    assert_eq!(curl["licenseDeclared"], "MIT");
    assert_eq!(
        curl["sourceInfo"],
        "built from the FreeBSD ports tree's ftp/curl"
    );
    assert_eq!(
        curl["externalRefs"][0]["referenceLocator"],
        "pkg:freebsd/curl@8.9.1?arch=FreeBSD%3A14%3Aamd64&origin=ftp%2Fcurl"
    );
    assert_eq!(curl["checksums"][0]["algorithm"], "SHA256");
    assert_eq!(curl["checksums"][0]["checksumValue"], "ab".repeat(32));
    assert!(spdx_package(&doc, "libnghttp2").get("checksums").is_none());
    assert_eq!(
        spdx_package(&doc, "perl5")["licenseDeclared"],
        "Artistic-1.0 OR GPL-1.0-or-later"
    );
    assert_eq!(
        spdx_package(&doc, "gtk+")["licenseDeclared"],
        "LGPL-2.0-only AND LicenseRef-freebsd-PD"
    );
    assert_eq!(
        spdx_package(&doc, "gtk+")["externalRefs"][0]["referenceLocator"],
        "pkg:freebsd/gtk%2B@2.24.33_1%2C1?arch=FreeBSD%3A14%3Aamd64&origin=x11-toolkits%2Fgtk20"
    );
    assert_eq!(
        doc["hasExtractedLicensingInfos"][0]["licenseId"],
        "LicenseRef-freebsd-PD"
    );

    // The base release, from /bin/freebsd-version.
    let os = doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["primaryPackagePurpose"] == "OPERATING_SYSTEM")
        .expect("the base system");
    assert_eq!(os["name"], "FreeBSD");
    assert_eq!(os["versionInfo"], "14.1-RELEASE-p5");

    // DEPENDS_ON, exactly as pkg recorded it.
    let id = |n: &str| {
        spdx_package(&doc, n)["SPDXID"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let depends: BTreeSet<(String, String)> = doc["relationships"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["relationshipType"] == "DEPENDS_ON")
        .map(|r| {
            (
                r["spdxElementId"].as_str().unwrap().to_string(),
                r["relatedSpdxElement"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want_deps: BTreeSet<(String, String)> = [
        ("curl", "libnghttp2"),
        ("curl", "ca_root_nss"),
        ("gtk+", "perl5"),
    ]
    .into_iter()
    .map(|(a, b)| (id(a), id(b)))
    .collect();
    assert_eq!(depends, want_deps);

    // The document namespace comes from the manifest digest; the bytes
    // are the same on every run, and --output writes the same bytes.
    let digest = w.sbom(&["web:1"])["packages"][0]["checksums"][0]["checksumValue"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        doc["documentNamespace"],
        format!("https://jbuild.invalid/spdx/sha256-{digest}")
    );
    let first = ok(w.jbuild().args(["sbom", "web:1"]));
    let second = ok(w.jbuild().args(["sbom", "web:1"]));
    assert_eq!(first, second);
    let file = w.tmp.path().join("web.spdx.json");
    ok(w.jbuild()
        .args(["sbom", "--output"])
        .arg(&file)
        .arg("web:1"));
    assert_eq!(fs::read_to_string(&file).unwrap(), first);

    let v = validate_spdx(&file);
    assert!(
        v.status.success(),
        "the SPDX document does not validate:\n{}{}",
        text(&v.stdout),
        text(&v.stderr)
    );
}

#[test]
fn the_spdx_schema_check_catches_a_broken_document() {
    // The validator is not a rubber stamp: the same document without a
    // package's required downloadLocation fails it.
    let w = World::new();
    w.image_with("web:1", &base_packages());
    let mut doc = w.sbom(&["web:1"]);
    doc["packages"][1]
        .as_object_mut()
        .unwrap()
        .remove("downloadLocation");
    let file = w.tmp.path().join("broken.json");
    fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let v = validate_spdx(&file);
    assert!(
        !v.status.success(),
        "a package without downloadLocation validated"
    );
}

#[test]
fn cyclonedx_has_the_fields_the_1_5_specification_requires() {
    let w = World::new();
    w.image_with("web:1", &base_packages());
    let bom = w.sbom(&["--format", "cyclonedx", "web:1"]);
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    assert_eq!(bom["version"], 1);
    let serial = bom["serialNumber"].as_str().unwrap();
    let uuid = serial
        .strip_prefix("urn:uuid:")
        .expect("a urn:uuid serial number");
    let groups: Vec<&str> = uuid.split('-').collect();
    assert_eq!(
        groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
        [8, 4, 4, 4, 12],
        "{serial}"
    );
    assert!(uuid.chars().all(|c| c == '-' || c.is_ascii_hexdigit()));
    assert!(humantime::parse_rfc3339(bom["metadata"]["timestamp"].as_str().unwrap()).is_ok());
    assert_eq!(bom["metadata"]["component"]["type"], "container");

    let components = bom["components"].as_array().unwrap();
    let libs: BTreeMap<&str, &Value> = components
        .iter()
        .filter(|c| c["type"] == "library")
        .map(|c| (c["name"].as_str().unwrap(), c))
        .collect();
    let want: BTreeSet<String> = base_packages().iter().map(|p| p.name.to_string()).collect();
    assert_eq!(
        libs.keys().map(|k| k.to_string()).collect::<BTreeSet<_>>(),
        want
    );
    for c in components {
        // Required of every component: type and name.
        assert!(c["type"].is_string() && c["name"].is_string(), "{c:#}");
    }
    let os = components
        .iter()
        .find(|c| c["type"] == "operating-system")
        .expect("the base system");
    assert_eq!(os["version"], "14.1-RELEASE-p5");
    let curl = libs["curl"];
    assert_eq!(curl["version"], "8.9.1");
    assert_eq!(
        curl["purl"],
        "pkg:freebsd/curl@8.9.1?arch=FreeBSD%3A14%3Aamd64&origin=ftp%2Fcurl"
    );
    assert_eq!(curl["licenses"][0]["expression"], "MIT");
    assert_eq!(curl["hashes"][0]["alg"], "SHA-256");
    assert_eq!(curl["hashes"][0]["content"], "ab".repeat(32));

    // Every dependency names bom-refs that exist.
    let refs: BTreeSet<&str> = components
        .iter()
        .map(|c| c["bom-ref"].as_str().unwrap())
        .chain([bom["metadata"]["component"]["bom-ref"].as_str().unwrap()])
        .collect();
    let mut curl_deps = BTreeSet::new();
    for d in bom["dependencies"].as_array().unwrap() {
        assert!(refs.contains(d["ref"].as_str().unwrap()), "{d:#}");
        for on in d["dependsOn"].as_array().unwrap() {
            assert!(refs.contains(on.as_str().unwrap()), "{d:#}");
            if d["ref"] == curl["bom-ref"] {
                curl_deps.insert(on.as_str().unwrap().to_string());
            }
        }
    }
    let want_curl: BTreeSet<String> = ["libnghttp2", "ca_root_nss"]
        .iter()
        .map(|n| libs[n]["bom-ref"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(curl_deps, want_curl);
}

#[test]
fn the_top_layer_s_database_wins_and_a_whiteout_hides_it() {
    // This test runs RUN steps.
    need!(Root, Busybox);
    let bb = static_busybox();
    let w = World::new();
    w.image_with("base:1", &base_packages());

    // A layer above replaces the database: only its packages are listed.
    make_db(
        &w.ctx().join("newer.sqlite"),
        &[Pkg {
            name: "nginx",
            version: "1.26.2",
            origin: "www/nginx",
            licenses: &["BSD2CLAUSE"],
            logic: 1,
            deps: &[],
            digest: None,
        }],
    );
    w.build(
        "newer:1",
        "FROM base:1\nCOPY newer.sqlite /var/db/pkg/local.sqlite\n",
    );
    let doc = w.sbom(&["newer:1"]);
    assert_eq!(names_of_spdx(&doc), BTreeSet::from(["nginx".to_string()]));

    // A layer that deletes it (a whiteout): no packages, the release stays.
    fs::copy(bb.unwrap(), w.ctx().join("busybox")).unwrap();
    w.build(
        "gone:1",
        "FROM base:1\nCOPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"rm\", \"/var/db/pkg/local.sqlite\"]\n",
    );
    let doc = w.sbom(&["gone:1"]);
    assert_eq!(names_of_spdx(&doc), BTreeSet::new(), "{doc:#}");
    assert!(doc["packages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["versionInfo"] == "14.1-RELEASE-p5"));
    let bom = w.sbom(&["--format", "cyclonedx", "gone:1"]);
    assert!(bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["type"] != "library"));
}

/// Builds `hostile:1` with `db` (the file's bytes) as the database, runs
/// `jbuild sbom` and checks it fails with exit 1, naming the image, the
/// file and `what`.
fn refused(w: &World, db: &Path, what: &str) {
    fs::copy(db, w.ctx().join("local.sqlite")).unwrap();
    w.build(
        "hostile:1",
        "FROM --platform=linux/amd64 scratch\nCOPY local.sqlite /var/db/pkg/local.sqlite\n",
    );
    let out = w.sbom_fails(&["hostile:1"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("hostile:1"), "{err}");
    assert!(err.contains("/var/db/pkg/local.sqlite"), "{err}");
    assert!(err.contains(what), "wanted `{what}` in:\n{err}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
}

#[test]
fn hostile_databases_are_refused_naming_the_image_and_the_file() {
    let w = World::new();
    let scratch = w.tmp.path().join("dbs");
    fs::create_dir_all(&scratch).unwrap();

    let not_sqlite = scratch.join("text");
    fs::write(&not_sqlite, "this is not a database\n".repeat(100)).unwrap();
    refused(&w, &not_sqlite, "not an SQLite database");

    let wrong = scratch.join("wrong.sqlite");
    Connection::open(&wrong)
        .unwrap()
        .execute_batch(
            "CREATE TABLE packages (id INTEGER PRIMARY KEY, title TEXT);\
             CREATE TABLE deps (x); CREATE TABLE licenses (x); CREATE TABLE pkg_licenses (x);",
        )
        .unwrap();
    refused(&w, &wrong, "does not have pkg(8)'s columns");

    let missing = scratch.join("missing.sqlite");
    Connection::open(&missing)
        .unwrap()
        .execute_batch("CREATE TABLE something (x);")
        .unwrap();
    refused(&w, &missing, "no table `packages`");

    // A view in a table's place could make any query as slow as its
    // author likes: refused before anything reads it.
    let view = scratch.join("view.sqlite");
    let db = Connection::open(&view).unwrap();
    let renamed = SCHEMA
        .replace("TABLE deps (", "TABLE real_deps (")
        .replace(" ON deps", " ON real_deps")
        .replace(" on deps", " on real_deps");
    db.execute_batch(&renamed).unwrap();
    db.execute_batch(
        "CREATE VIEW deps AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) \
         SELECT '' AS origin, '' AS name, '' AS version, i AS package_id FROM n;",
    )
    .unwrap();
    drop(db);
    refused(&w, &view, "`deps` is a view");

    // One byte past the 1 MiB limit on any one value (the limits test
    // shows a value of exactly 1 MiB is read).
    let huge = scratch.join("huge.sqlite");
    make_db(&huge, &base_packages());
    set_curl_comment(&huge, (1 << 20) + 1);
    refused(&w, &huge, "cannot read table `packages`");
}

/// The error reading `web:1` within `limits` gives (the inventory, which
/// holds a 1 MiB comment, is not printed when there is none).
fn refused_by(
    store: &jbuild::store::Store,
    limits: &jbuild::sbom::DbLimits,
) -> jbuild::sbom::SbomError {
    let platform = jbuild::image::Platform::default_for_host();
    match jbuild::sbom::inventory(store, "web:1", &platform, limits) {
        Ok(_) => panic!("read within {limits:?}"),
        Err(e) => e,
    }
}

fn set_curl_comment(db: &Path, bytes: usize) {
    Connection::open(db)
        .unwrap()
        .execute(
            "UPDATE packages SET comment = ?1 WHERE name = 'curl'",
            params!["x".repeat(bytes)],
        )
        .unwrap();
}

#[test]
fn limits_on_rows_and_bytes_refuse_a_database_past_them() {
    // The figures docs/sbom.md states.
    let limits = jbuild::sbom::DbLimits::default();
    assert_eq!(
        (
            limits.max_bytes,
            limits.max_rows,
            limits.max_value,
            limits.max_steps
        ),
        (1 << 30, 1_000_000, 1 << 20, 1_000_000_000)
    );
    let w = World::new();
    make_db(&w.ctx().join("local.sqlite"), &base_packages());
    set_curl_comment(&w.ctx().join("local.sqlite"), 1 << 20);
    w.build(
        "web:1",
        "FROM --platform=linux/amd64 scratch\nCOPY local.sqlite /var/db/pkg/local.sqlite\n",
    );
    let store = jbuild::store::Store::open(&w.root().join("store")).unwrap();
    let platform = jbuild::image::Platform::default_for_host();
    let inv = jbuild::sbom::inventory(&store, "web:1", &platform, &Default::default()).unwrap();
    assert_eq!(inv.packages.len(), 5);
    assert_eq!(inv.packages[1].name, "curl");
    assert_eq!(inv.packages[1].comment.len(), 1 << 20);
    // The longest table is pkg_licenses, 7 rows.
    let just_enough = jbuild::sbom::DbLimits {
        max_rows: 7,
        ..Default::default()
    };
    jbuild::sbom::inventory(&store, "web:1", &platform, &just_enough).unwrap();

    let few_rows = jbuild::sbom::DbLimits {
        max_rows: 6,
        ..Default::default()
    };
    let e = refused_by(&store, &few_rows);
    assert!(e.is_user_error());
    let chain = format!("{:#}", anyhow::Error::new(e));
    assert!(
        chain.contains("`pkg_licenses` has 7 rows; jbuild reads at most 6"),
        "{chain}"
    );

    // Whatever the file holds, the read ends: past its SQLite steps it
    // stops with an error.
    let few_steps = jbuild::sbom::DbLimits {
        max_steps: 200,
        ..Default::default()
    };
    let e = refused_by(&store, &few_steps);
    assert!(e.is_user_error());
    let chain = format!("{:#}", anyhow::Error::new(e));
    assert!(chain.contains("took more than 200 SQLite steps"), "{chain}");

    let few_bytes = jbuild::sbom::DbLimits {
        max_bytes: 4096,
        ..Default::default()
    };
    let e = refused_by(&store, &few_bytes);
    assert!(e.is_user_error());
    let chain = format!("{:#}", anyhow::Error::new(e));
    assert!(
        chain.contains("/var/db/pkg/local.sqlite is")
            && chain.contains("jbuild reads at most 4096"),
        "{chain}"
    );
}

#[test]
fn an_image_without_a_pkg_database_has_only_itself_says_so_and_an_unknown_image_is_the_user_s() {
    let w = World::new();
    w.build(
        "bare:1",
        "FROM --platform=linux/amd64 scratch\nCOPY freebsd-version /etc/not-here\n",
    );
    let out = run(w.jbuild().args(["sbom", "bare:1"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["packages"].as_array().unwrap().len(), 1, "{doc:#}");
    assert_eq!(doc["packages"][0]["primaryPackagePurpose"], "CONTAINER");
    // Said on standard error, so the document on standard output stays one.
    assert!(
        text(&out.stderr).contains("bare:1 has no pkg database"),
        "{}",
        text(&out.stderr)
    );
    let quiet = run(w.jbuild().args(["-q", "sbom", "bare:1"]));
    assert!(quiet.stderr.is_empty(), "{}", text(&quiet.stderr));
    // An image with one says nothing of it.
    w.image_with("web:1", &base_packages());
    let out = run(w.jbuild().args(["sbom", "web:1"]));
    assert!(
        !text(&out.stderr).contains("no pkg database"),
        "{}",
        text(&out.stderr)
    );

    let out = w.sbom_fails(&["nosuch:1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("nosuch"),
        "{}",
        text(&out.stderr)
    );
}
