//! `pkg::install`, the installer's one entry: the image's repository
//! configuration and keys, the signed catalogue, resolution against the
//! image's database, the package cache, extraction with the database and
//! Lua joined, `pkg` bootstrapped. The database is read back with the
//! `sqlite3` program.

use std::fs;
use std::path::Path;
use std::process::Command;

use jbuild::blame::Blame;
use jbuild::pkg::fetch::Cache;
use jbuild::pkg::install::{install, Event, InstallError, Request};
use jbuild::transport::http::Http;

use crate::support::pkgrepo::image::{freebsd_tree, write_repo, UID};
use crate::support::pkgrepo::Key;

struct Fixture {
    _t: tempfile::TempDir,
    root: std::path::PathBuf,
    cache: Cache,
    work: std::path::PathBuf,
}

fn fixture(tamper: bool) -> Fixture {
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let repo = t.path().join("repo");
    write_repo(&repo, &key, tamper);
    let root = t.path().join("root");
    freebsd_tree(&root, "amd64", &format!("file://{}", repo.display()), &key);
    let work = t.path().join("work");
    fs::create_dir_all(&work).unwrap();
    Fixture {
        cache: Cache::new(t.path().join("cache")),
        root,
        work,
        _t: t,
    }
}

fn run(f: &Fixture, packages: &[&str], bootstrap: bool) -> Result<Vec<Event>, InstallError> {
    let packages: Vec<String> = packages.iter().map(|s| s.to_string()).collect();
    let http = Http::default();
    let req = Request {
        root: &f.root,
        packages: &packages,
        platform_arch: "amd64",
        repos_dir: None,
        cache: &f.cache,
        http: &http,
        jobs: 2,
        work: &f.work,
        time: 1_700_000_000,
        clamp_mtime: Some(1_700_000_000),
        bootstrap,
        limits: jbuild::layer::Limits::default(),
        file_flags: jbuild::fsutil::flags::host(),
        sources: Default::default(),
        ignore_osversion: None,
        pkg_conf: &Default::default(),
        scripts: jbuild::pkg::install::Scripts::Refuse,
    };
    let mut events = Vec::new();
    install(&req, &mut |e| events.push(e))?;
    Ok(events)
}

fn sql(root: &Path, query: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(root.join("var/db/pkg/local.sqlite"))
        .arg(query)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn installed(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Installed { name, version, .. } => Some(format!("{name}-{version}")),
            _ => None,
        })
        .collect()
}

#[test]
fn a_closure_installs_with_its_database_lua_messages_and_pkg_bootstrapped() {
    let f = fixture(false);
    let events = run(&f, &["app"], true).unwrap();
    // pkg first (bootstrap), then the closure dependencies first.
    assert_eq!(
        installed(&events),
        ["pkg-2.1.2", "libfoo-1.0", "app-2.1_3,1"]
    );
    let said: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::Message { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(said, ["app: sample installed", "app says thanks"]);
    // The @sample Lua ran in the root: the sample copied beside itself.
    let root = &f.root;
    assert_eq!(
        fs::read(root.join("usr/local/etc/app.conf")).unwrap(),
        b"port = 80\n"
    );
    assert_eq!(
        fs::read_link(root.join("usr/local/bin/app-link")).unwrap(),
        Path::new("app")
    );
    if nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::MetadataExt;
        let m = fs::metadata(root.join("usr/local/share/app/data")).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o7777), (UID, 0o640));
    }
    // pkg info -a's query, and automatic as pkg records it: what was asked
    // for (and pkg, bootstrapped) is not automatic.
    assert_eq!(
        sql(
            root,
            "SELECT name, version, automatic, time FROM packages ORDER BY name"
        ),
        "app|2.1_3,1|0|1700000000\nlibfoo|1.0|1|1700000000\npkg|2.1.2|0|1700000000\n"
    );
    assert_eq!(
        sql(
            root,
            "SELECT p.name, f.path FROM files f JOIN packages p ON p.id = f.package_id \
             WHERE p.name = 'app' ORDER BY f.path"
        ),
        "app|/usr/local/bin/app\napp|/usr/local/bin/app-link\n\
         app|/usr/local/etc/app.conf.sample\napp|/usr/local/share/app/data\n"
    );
    assert_eq!(
        sql(
            root,
            "SELECT d.name FROM deps d JOIN packages p ON p.id = d.package_id WHERE p.name = 'app'"
        ),
        "libfoo\n"
    );
    // pkg's annotation loader's query: the repository it came from.
    assert_eq!(
        sql(
            root,
            "SELECT k.annotation, v.annotation FROM pkg_annotation p \
             JOIN annotation k ON (p.tag_id = k.annotation_id) \
             JOIN annotation v ON (p.value_id = v.annotation_id) \
             WHERE p.package_id = (SELECT id FROM packages WHERE name = 'app') \
             AND k.annotation LIKE 'repo%' ORDER BY k.annotation"
        ),
        "repo_type|binary\nrepository|FreeBSD\n"
    );

    // A second install into the same image keeps what it has: libfoo is a
    // dependency already there, pkg is not bootstrapped again.
    let events = run(&f, &["other"], true).unwrap();
    assert_eq!(installed(&events), ["other-0.5"]);
    assert!(events.contains(&Event::Kept {
        name: "libfoo".into(),
        version: "1.0".into()
    }));
    assert_eq!(
        sql(root, "SELECT name FROM packages ORDER BY name"),
        "app\nlibfoo\nother\npkg\n"
    );
    // Every package came from the cache the second time it was needed.
    let cached = events
        .iter()
        .all(|e| !matches!(e, Event::Fetched { name, cached: false, .. } if name == "libfoo"));
    assert!(cached);
}

#[test]
fn without_bootstrap_pkg_is_not_added() {
    let f = fixture(false);
    let events = run(&f, &["libfoo"], false).unwrap();
    assert_eq!(installed(&events), ["libfoo-1.0"]);
    assert!(!f.root.join("usr/local/sbin/pkg").exists());
}

#[test]
fn a_package_with_a_shell_script_runs_it_and_says_its_output() {
    let f = fixture(false);
    let events = run(&f, &["scripted"], false).unwrap();
    assert!(
        events.contains(&Event::Message {
            package: "scripted-1.0".into(),
            text: "hi".into()
        }),
        "{events:?}"
    );
    assert!(f.root.join("usr/local/bin/scripted").exists());
}

#[test]
fn a_tampered_catalogue_is_refused_before_anything_is_installed() {
    let f = fixture(true);
    let e = run(&f, &["libfoo"], false).unwrap_err();
    let text = jbuild::report::error_chain(&e);
    assert!(text.contains("FreeBSD"), "{text}");
    assert!(e.is_user_error(), "{text}");
    assert!(!f.root.join("usr/local/lib/libfoo.so.1").exists());
    assert!(!f.root.join("var/db/pkg/local.sqlite").exists());
}
