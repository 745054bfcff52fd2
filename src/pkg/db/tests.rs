use super::*;
use crate::pkg::manifest;

fn manifest(name: &str, deps: &[&str], files: &[&str]) -> manifest::Manifest {
    let deps: Vec<String> = deps
        .iter()
        .map(|d| format!(r#""{d}":{{"origin":"t/{d}","version":"1"}}"#))
        .collect();
    let files: Vec<String> = files.iter().map(|f| format!(r#""{f}":"1$x""#)).collect();
    manifest::parse(
        &format!(
            r#"{{"name":"{name}","origin":"t/{name}","version":"1.0","comment":"c","desc":"d",
            "maintainer":"m@x","www":"https://x","abi":"FreeBSD:14:amd64","prefix":"/usr/local",
            "flatsize":1,"deps":{{{}}},"files":{{{}}},"categories":["t"],"licenses":["MIT"],
            "scripts":{{"post-install":"true"}},"lua_scripts":{{"post-install":["print(1)"]}},
            "options":{{"A":"on"}},"annotations":{{"flavor":"x"}},"directories":{{"/usr/local/d":"y"}},
            "config":["/usr/local/etc/{name}.conf"]}}"#,
            deps.join(","),
            files.join(",")
        ),
        name,
    )
    .unwrap()
}

#[test]
fn a_new_database_records_and_reads_back() {
    let root = tempfile::tempdir().unwrap();
    let mut db = LocalDb::open_or_create(root.path(), 1_700_000_000).unwrap();
    assert_eq!(db.user_version(), schema::USER_VERSION);
    db.record(
        &manifest("lib", &[], &["/usr/local/lib/a"]),
        &Record {
            automatic: true,
            ..Record::default()
        },
    )
    .unwrap();
    db.record(
        &manifest("app", &["lib"], &["/usr/local/bin/a"]),
        &Record::default(),
    )
    .unwrap();
    drop(db);
    let db = LocalDb::open_or_create(root.path(), 0).unwrap();
    let got = db.installed().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].name, "app");
    assert_eq!(got[0].deps, ["lib"]);
    assert!(!got[0].automatic && got[1].automatic);
    let time: i64 = db
        .conn
        .query_row("SELECT time FROM packages WHERE name='lib'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(time, 1_700_000_000);
    let dir = root.path().join("var/db/pkg");
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["local.sqlite"], "no journal is left");
}

#[test]
fn a_file_owned_by_another_package_is_refused_naming_both() {
    let root = tempfile::tempdir().unwrap();
    let mut db = LocalDb::open_or_create(root.path(), 0).unwrap();
    db.record(&manifest("a", &[], &["/usr/local/x"]), &Record::default())
        .unwrap();
    let e = db
        .record(&manifest("b", &[], &["/usr/local/x"]), &Record::default())
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("b-1.0") && text.contains("a-1.0") && text.contains("/usr/local/x"),
        "{text}"
    );
    assert!(e.is_user_error());
    let names: Vec<_> = db
        .installed()
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["a"], "nothing of b is kept");
}

#[test]
fn a_hostile_or_broken_database_is_refused_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("var/db/pkg");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("local.sqlite");
    std::fs::write(&path, b"this is not sqlite at all, not even close......").unwrap();
    let e = LocalDb::open_or_create(root.path(), 0).err().unwrap();
    assert!(e.to_string().contains("local.sqlite"), "{e}");
    assert!(e.is_user_error());

    // pkg's tables, but a trigger where jbuild writes.
    std::fs::remove_file(&path).unwrap();
    drop(LocalDb::open_or_create(root.path(), 0).unwrap());
    let c = Connection::open(&path).unwrap();
    c.execute_batch("CREATE TRIGGER t AFTER INSERT ON files BEGIN SELECT 1; END;")
        .unwrap();
    drop(c);
    let e = LocalDb::open_or_create(root.path(), 0).err().unwrap();
    assert!(
        e.to_string().contains("trigger") && e.to_string().contains("local.sqlite"),
        "{e}"
    );

    // A schema older than pkg 2's.
    std::fs::remove_file(&path).unwrap();
    drop(LocalDb::open_or_create(root.path(), 0).unwrap());
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 30")
        .unwrap();
    let e = LocalDb::open_or_create(root.path(), 0).err().unwrap();
    assert!(matches!(e, DbError::TooOld { version: 30, .. }), "{e}");
}

#[test]
fn var_db_pkg_must_not_lead_out_of_the_root() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("var")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("var/db")).unwrap();
    let e = LocalDb::open_or_create(root.path(), 0).err().unwrap();
    assert!(matches!(e, DbError::Unsafe { .. }), "{e}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
}
