//! `local.sqlite` written by `jbuild::pkg::db` for packages the tests
//! write (`tests/support/pkgrepo/full.rs`), read back with the `sqlite3`
//! program using the statements pkg itself runs, copied from pkg's source:
//! `pkg info -a` (`pkgdb_query_cond` in `libpkg/pkgdb_query.c`), `-l`,
//! `-d`, `-r` and the other loaders (`libpkg/pkgdb_iterator.c`), and
//! `pkg check -s` (each file's recorded sum, from the files loader).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use jbuild::blame::Blame;
use jbuild::pkg::db::{LocalDb, Record};
use jbuild::pkg::manifest;

use crate::support::pkgrepo::full::{file_sum, full, read_manifest, FullPkg};

/// `pkg info -a`'s statement (`pkgdb_query_cond`, `MATCH_ALL`).
const INFO_ALL: &str = "WITH flavors AS   (SELECT package_id, value.annotation AS flavor \
FROM pkg_annotation    LEFT JOIN annotation tag ON pkg_annotation.tag_id = tag.annotation_id \
   LEFT JOIN annotation value ON pkg_annotation.value_id = value.annotation_id \
   WHERE tag.annotation = 'flavor') SELECT DISTINCT(p.id), origin, p.name, p.name as uniqueid, \
version, comment, desc, message, arch, maintainer, www, prefix, flatsize, licenselogic, \
automatic, locked, time, manifestdigest, vital FROM packages AS p \
LEFT JOIN pkg_categories ON p.id = pkg_categories.package_id \
LEFT JOIN categories ON categories.id = pkg_categories.category_id \
LEFT JOIN flavors ON flavors.package_id = p.id  ORDER BY p.name";
/// `pkg info -l` and `pkg check -s` (`pkgdb_load_files`).
const FILES: &str = "SELECT path, sha256  FROM files  WHERE package_id = ?1  ORDER BY PATH ASC";
const CONFIG_FILES: &str =
    "SELECT path, content  FROM config_files  WHERE package_id = ?1  ORDER BY PATH ASC";
/// `pkg info -d` (`pkgdb_load_deps`).
const DEPS: &str = "SELECT DISTINCT d.name, d.origin, p.version, 0  FROM deps AS d    \
LEFT JOIN packages AS p ON    (p.origin = d.origin AND p.name = d.name)  WHERE d.package_id = ?1  \
ORDER BY d.origin DESC";
/// `pkg info -r` (`pkgdb_load_rdeps`).
const RDEPS: &str = "SELECT p.name, p.origin, p.version, 0  FROM packages AS p    \
INNER JOIN deps AS d ON (p.id = d.package_id)  WHERE d.name = ?1";
const DIRS: &str = "SELECT path, try  FROM pkg_directories, directories  WHERE package_id = ?1    \
AND directory_id = directories.id  ORDER by path DESC";
const LICENSES: &str = "SELECT ifnull(group_concat(name, ', '), '') AS name  \
FROM pkg_licenses, licenses AS l  WHERE package_id = ?1    AND license_id = l.id  ORDER by name DESC";
const CATEGORIES: &str = "SELECT name  FROM pkg_categories, categories AS c  \
WHERE package_id = ?1    AND category_id = c.id  ORDER by name DESC";
const USERS: &str = "SELECT users.name  FROM pkg_users, users  WHERE package_id = ?1    \
AND user_id = users.id  ORDER by name DESC";
const GROUPS: &str = "SELECT groups.name  FROM pkg_groups, groups  WHERE package_id = ?1    \
AND group_id = groups.id  ORDER by name DESC";
const SHLIBS_REQUIRED: &str = "SELECT name  FROM pkg_shlibs_required, shlibs AS s  \
WHERE package_id = ?1    AND shlib_id = s.id  ORDER by name ASC";
const SHLIBS_PROVIDED: &str = "SELECT name  FROM pkg_shlibs_provided, shlibs AS s  \
WHERE package_id = ?1    AND shlib_id = s.id  ORDER by name ASC";
const ANNOTATIONS: &str = "SELECT k.annotation AS tag, v.annotation AS value  FROM pkg_annotation p    \
JOIN annotation k ON (p.tag_id = k.annotation_id)    JOIN annotation v ON (p.value_id = v.annotation_id)  \
WHERE p.package_id = ?1  ORDER BY tag, value";
const LUA_SCRIPTS: &str = "SELECT lua_script, type  FROM lua_script    \
JOIN pkg_lua_script USING(lua_script_id)  WHERE package_id = ?1";
const OPTIONS: &str = "SELECT option, value  FROM option    JOIN pkg_option USING(option_id)  \
WHERE package_id = ?1  ORDER BY option";
/// The scripts a later `pkg delete` runs (`pkg_script` joined to `script`).
const SCRIPTS: &str = "SELECT script, type FROM pkg_script JOIN script USING(script_id) \
WHERE package_id = ?1 ORDER BY type";

/// What the `sqlite3` program prints for `sql` with `?1` bound to `param`
/// (an SQL literal), `|` between columns.
fn sqlite3(db: &Path, param: Option<&str>, sql: &str) -> String {
    let mut script = String::new();
    if let Some(p) = param {
        script += &format!(".parameter set ?1 {p}\n");
    }
    script += sql;
    script += ";\n";
    let mut child = Command::new("sqlite3")
        .arg("-bail")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sqlite3 program runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "sqlite3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn packages() -> Vec<FullPkg> {
    let mut app = full(
        "app",
        "2.1_3,1",
        &["lib"],
        &[
            ("/usr/local/bin/app", b"#!/bin/sh\necho app\n"),
            ("/usr/local/etc/app.conf", b"listen 80\n"),
            ("/usr/local/share/app/a b%c.txt", b"odd name\n"),
        ],
    );
    app.config = vec!["/usr/local/etc/app.conf".into()];
    vec![
        full(
            "lib",
            "1.0",
            &[],
            &[("/usr/local/lib/liblib.so.1", b"\x7fELF not really\n")],
        ),
        app,
    ]
}

/// Records `pkgs` (their `+MANIFEST`s read back from the `.pkg` files)
/// into `root`'s database: the first as a dependency.
fn install(root: &Path, repo: &Path, pkgs: &[FullPkg], time: i64) {
    std::fs::create_dir_all(root).unwrap();
    let mut db = LocalDb::open_or_create(root, time).unwrap();
    for (i, p) in pkgs.iter().enumerate() {
        let text = read_manifest(&p.write(repo));
        let m = manifest::parse(&text, &p.name).unwrap();
        let mut rec = Record {
            automatic: i == 0,
            repository: Some("test".into()),
            ..Record::default()
        };
        for (path, content) in &p.files {
            if p.config.contains(path) {
                rec.config_contents
                    .insert(path.clone(), String::from_utf8(content.clone()).unwrap());
            }
        }
        db.record(&m, &rec).unwrap();
    }
}

#[test]
fn pkg_info_and_pkg_check_read_what_was_recorded() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    install(&root, &t.path().join("repo"), &packages(), 1_700_000_000);
    let db = root.join("var/db/pkg/local.sqlite");

    assert_eq!(sqlite3(&db, None, "PRAGMA user_version"), "36\n");
    assert_eq!(sqlite3(&db, None, "PRAGMA journal_mode"), "delete\n");
    assert_eq!(sqlite3(&db, None, "SELECT * FROM pkg_lock"), "0|0|0\n");

    // pkg info -a: id, origin, name, uniqueid, version, comment, desc,
    // message, arch, ..., automatic, locked, time, manifestdigest, vital.
    let all = sqlite3(&db, None, INFO_ALL);
    let rows: Vec<Vec<&str>> = all.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), 2, "{all}");
    assert_eq!(
        &rows[0][..6],
        ["2", "test/app", "app", "app", "2.1_3,1", "app for tests"]
    );
    assert_eq!(rows[0][6], "app is 100% a test package — café");
    assert_eq!(
        rows[0][7],
        r#"[{"message":"Thank you for installing app"},{"message":"Upgrading from 0.x","type":"upgrade","maximum_version":"1.0"}]"#
    );
    assert_eq!(
        &rows[0][8..],
        [
            "FreeBSD:14:amd64",
            "tests@example.invalid",
            "https://example.invalid",
            "/usr/local",
            "38",
            "124",
            "0",
            "0",
            "1700000000",
            "",
            "0"
        ]
    );
    assert_eq!(&rows[1][..5], ["1", "test/lib", "lib", "lib", "1.0"]);
    assert_eq!(rows[1][14], "1", "a dependency is automatic");

    // pkg info -l app (package id 2) and pkg check -s: every recorded sum
    // is the sum of the content the package installs.
    let files = sqlite3(&db, Some("2"), FILES);
    let want: String = {
        let mut f: Vec<(String, Vec<u8>)> = packages()[1].files.clone();
        f.sort();
        f.iter()
            .map(|(p, c)| format!("{p}|{}\n", file_sum(c)))
            .collect()
    };
    assert_eq!(files, want);
    assert_eq!(
        sqlite3(&db, Some("2"), CONFIG_FILES),
        "/usr/local/etc/app.conf|listen 80\n\n"
    );
    // pkg info -d app, pkg info -r lib.
    assert_eq!(sqlite3(&db, Some("2"), DEPS), "lib|test/lib|1.0|0\n");
    assert_eq!(sqlite3(&db, Some("1"), DEPS), "");
    assert_eq!(
        sqlite3(&db, Some("'lib'"), RDEPS),
        "app|test/app|2.1_3,1|0\n"
    );
    assert_eq!(sqlite3(&db, Some("'app'"), RDEPS), "");

    assert_eq!(sqlite3(&db, Some("2"), DIRS), "/usr/local/share/app|1\n");
    assert_eq!(sqlite3(&db, Some("2"), LICENSES), "BSD2CLAUSE, MIT\n");
    assert_eq!(sqlite3(&db, Some("2"), CATEGORIES), "test\ndevel\n");
    assert_eq!(sqlite3(&db, Some("2"), USERS), "appd\n");
    assert_eq!(sqlite3(&db, Some("2"), GROUPS), "appd\n");
    assert_eq!(sqlite3(&db, Some("2"), SHLIBS_REQUIRED), "libc.so.7\n");
    assert_eq!(sqlite3(&db, Some("2"), SHLIBS_PROVIDED), "libapp.so.1\n");
    assert_eq!(
        sqlite3(&db, Some("2"), ANNOTATIONS),
        "FreeBSD_version|1403000\nflavor|default\nrepo_type|binary\nrepository|test\n"
    );
    assert_eq!(
        sqlite3(&db, Some("2"), LUA_SCRIPTS),
        "pkg.print_msg(\"app\")|1\n"
    );
    assert_eq!(sqlite3(&db, Some("2"), OPTIONS), "DOCS|on\nEXAMPLES|off\n");
    assert_eq!(
        sqlite3(&db, Some("2"), SCRIPTS),
        "echo installing app 100%|0\necho bye|3\n"
    );
    assert_eq!(
        sqlite3(&db, None, "SELECT provide FROM provides ORDER BY id"),
        "lib-api\napp-api\n"
    );
    assert_eq!(
        sqlite3(&db, None, "SELECT count(*) FROM pkg_requires"),
        "2\n"
    );
    assert_eq!(sqlite3(&db, None, "PRAGMA integrity_check"), "ok\n");
    assert_eq!(sqlite3(&db, None, "PRAGMA foreign_key_check"), "");

    // jbuild sbom's reader of an image's database reads it too.
    let read = jbuild::sbom::pkgdb::read(&db, &Default::default()).unwrap();
    let names: Vec<_> = read
        .iter()
        .map(|p| (p.name.as_str(), p.licenses.len(), p.deps.len()))
        .collect();
    assert_eq!(names, [("app", 2, 1), ("lib", 2, 0)]);
}

#[test]
fn the_same_installs_write_the_same_bytes() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    install(&a, &t.path().join("repo-a"), &packages(), 1_700_000_000);
    install(&b, &t.path().join("repo-b"), &packages(), 1_700_000_000);
    let read = |r: &Path| std::fs::read(r.join("var/db/pkg/local.sqlite")).unwrap();
    assert!(read(&a) == read(&b), "two writes of one install differ");
    let c = t.path().join("c");
    install(&c, &t.path().join("repo-c"), &packages(), 1_700_000_001);
    assert!(read(&a) != read(&c), "the install time is recorded");
}

#[test]
fn an_existing_database_keeps_its_version_and_its_columns_are_filled() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let pkgs = packages();
    install(&root, &t.path().join("repo"), &pkgs[..1], 5);
    let db = root.join("var/db/pkg/local.sqlite");
    // What pkg 2.4's upgrade (schema 37) adds, and a newer version.
    sqlite3(
        &db,
        None,
        "ALTER TABLE files ADD COLUMN uname TEXT; ALTER TABLE files ADD COLUMN gname TEXT;\
         ALTER TABLE files ADD COLUMN perm INTEGER; ALTER TABLE files ADD COLUMN fflags INTEGER;\
         ALTER TABLE files ADD COLUMN mtime INTEGER;\
         ALTER TABLE files ADD COLUMN symlink_target TEXT; PRAGMA user_version = 42",
    );
    let installed = LocalDb::open_or_create(&root, 6)
        .unwrap()
        .installed()
        .unwrap();
    assert_eq!(installed.len(), 1);
    assert_eq!(
        (installed[0].name.as_str(), installed[0].automatic),
        ("lib", true)
    );
    install(&root, &t.path().join("repo"), &pkgs[1..], 6);
    assert_eq!(sqlite3(&db, None, "PRAGMA user_version"), "42\n");
    assert_eq!(
        sqlite3(
            &db,
            None,
            "SELECT uname, gname, perm FROM files WHERE path = '/usr/local/bin/app'"
        ),
        "root|wheel|420\n"
    );
    assert_eq!(
        sqlite3(&db, None, "SELECT name, time FROM packages ORDER BY id"),
        "lib|5\napp|6\n"
    );
}

#[test]
fn a_corrupt_database_is_an_error_naming_the_file() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    install(&root, &t.path().join("repo"), &packages()[..1], 5);
    let db = root.join("var/db/pkg/local.sqlite");
    let mut bytes = std::fs::read(&db).unwrap();
    // Scribble over every page after the first (the schema's root page).
    for b in bytes.iter_mut().skip(4096) {
        *b = 0xa5;
    }
    std::fs::write(&db, &bytes).unwrap();
    let e = LocalDb::open_or_create(&root, 5).err().expect("refused");
    let text = e.to_string();
    assert!(text.contains(&db.display().to_string()), "{text}");
    assert!(e.is_user_error(), "{text}");
}
