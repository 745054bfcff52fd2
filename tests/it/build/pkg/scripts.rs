//! Packages' shell scripts carried out by jbuild's installer (issue 32),
//! through the `jbuild` binary on Linux, with packages whose scripts are
//! the ports tree's templates as `tests/support/pkgrepo/scripts.rs`
//! writes them: `USERS=`/`GROUPS=` (both generations of the template),
//! `@ldconfig`, FreeBSD-caroot's `certctl rehash`, a cache rebuilder,
//! a command jbuild does not know, failing scripts. What they did is read
//! back by other programs than jbuild: the accounts as text,
//! `pwd.db`/`spwd.db` by `db_dump185` (Debian's `libdb1-compat`) against
//! records built here from `pwd_mkdb`'s documented encoding, owners in
//! the step's layer by GNU tar, the hints file by a reader of
//! `elf-hints.h`'s header written here, certificate links against
//! `openssl x509 -hash`.
#![cfg(target_os = "linux")]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::{build_json, last_layer_listing, said, serve, stored};
use crate::support::common::{export_unpacked, jbuild, json_result, ok, run};
use crate::support::limits::Server;
use crate::support::pkgrepo::image::{freebsd_tree, with, UID, USER};
use crate::support::pkgrepo::pkgfile::{file, owned};
use crate::support::pkgrepo::scripts::{
    fc_cache, users_groups, Group, User, Variant, CERTCTL, LDCONFIG,
};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing, TestPkg};

/// redis's numbers in the ports tree's `UIDs`/`GIDs`.
const REDIS: u32 = 535;
/// git_daemon's.
const GIT_DAEMON: u32 = 964;

fn redis() -> TestPkg {
    let script = users_groups(
        &[User {
            login: "redis",
            uid: REDIS,
            gid: REDIS,
            gecos: "Redis Daemon",
            home: "/var/db/redis",
            shell: "/usr/sbin/nologin",
        }],
        &[Group {
            name: "redis",
            gid: REDIS,
            members: &[],
        }],
        Variant::Newer,
    );
    with(
        "redis",
        "7.2.4",
        &[],
        vec![
            file("/usr/local/bin/redis-server", 0o755, b"redis\n"),
            owned(
                "/var/db/redis/dump.rdb",
                0o640,
                "redis",
                "redis",
                b"REDIS0011\n",
            ),
        ],
        vec![("scripts", serde_json::json!({ "pre-install": script }))],
    )
}

fn git() -> TestPkg {
    // The older template: no `|| exit $?`; git_daemon joins a group the
    // image has (`groupmod -m`).
    let script = users_groups(
        &[User {
            login: "git_daemon",
            uid: GIT_DAEMON,
            gid: GIT_DAEMON,
            gecos: "git daemon",
            home: "/nonexistent",
            shell: "/usr/sbin/nologin",
        }],
        &[
            Group {
                name: "git_daemon",
                gid: GIT_DAEMON,
                members: &[],
            },
            Group {
                name: USER,
                gid: UID,
                members: &["git_daemon"],
            },
        ],
        Variant::Older,
    );
    with(
        "git",
        "2.45.2",
        &[],
        vec![owned(
            "/usr/local/share/git/daemon-export",
            0o644,
            "git_daemon",
            "git_daemon",
            b"export\n",
        )],
        vec![("scripts", serde_json::json!({ "pre-install": script }))],
    )
}

fn scripted(
    name: &str,
    items: Vec<crate::support::pkgrepo::pkgfile::Item>,
    scripts: Value,
) -> TestPkg {
    with(name, "1.0", &[], items, vec![("scripts", scripts)])
}

/// Every package of the tests' repository; `certs` the certificates the
/// caroot-like package installs (name, PEM).
fn packages(certs: &[(String, Vec<u8>)]) -> Vec<TestPkg> {
    let libs = vec![
        file("/usr/local/lib/libbar.so.1", 0o644, b"libbar\n"),
        file("/usr/local/lib/bar/libbaz.so.1", 0o644, b"libbaz\n"),
        file(
            "/usr/local/libdata/ldconfig/libbar",
            0o644,
            b"/usr/local/lib/bar\n",
        ),
    ];
    let pems = certs
        .iter()
        .map(|(n, pem)| file(&format!("/usr/share/certs/trusted/{n}.pem"), 0o644, pem))
        .collect();
    vec![
        redis(),
        git(),
        scripted(
            "libbar",
            libs,
            serde_json::json!({ "post-install": LDCONFIG }),
        ),
        with(
            "certctl",
            "1.0",
            &[],
            vec![file("/usr/sbin/certctl", 0o555, b"certctl\n")],
            vec![],
        ),
        with(
            "caroot",
            "1.0",
            &["certctl"],
            pems,
            vec![("scripts", serde_json::json!({ "post-install": CERTCTL }))],
        ),
        scripted(
            "fonts",
            vec![file("/usr/local/share/fonts/test/a.pcf", 0o644, b"font\n")],
            serde_json::json!({ "post-install": fc_cache("/usr/local/share/fonts/test") }),
        ),
        scripted(
            "weird",
            vec![file("/usr/local/bin/weird", 0o755, b"weird\n")],
            serde_json::json!({ "post-install": "echo setting up\nfrobnicate --all /usr/local\n" }),
        ),
        scripted(
            "failpre",
            vec![file("/usr/local/bin/failpre", 0o755, b"x\n")],
            serde_json::json!({ "pre-install": "echo about to fail\necho no way >&2\nexit 1\n" }),
        ),
        scripted(
            "failpost",
            vec![file("/usr/local/bin/failpost", 0o755, b"x\n")],
            serde_json::json!({
                "post-install": "echo post fails >&2\nexit 2\n",
                "install": "echo \"install script: $1 $2 in ${PKG_ROOTDIR} for ${PKG_NAME}\"\n",
            }),
        ),
    ]
}

/// Two self-signed certificates made by the `openssl` program.
fn certificates(t: &Path) -> Vec<(String, Vec<u8>)> {
    ["alpha", "beta"]
        .iter()
        .map(|n| {
            let (key, pem) = (t.join(format!("{n}.key")), t.join(format!("{n}.pem")));
            let out = Command::new("openssl")
                .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
                .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "3650"])
                .args(["-subj", &format!("/CN=jbuild test CA {n}"), "-keyout"])
                .arg(&key)
                .arg("-out")
                .arg(&pem)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            (n.to_string(), fs::read(&pem).unwrap())
        })
        .collect()
}

pub(super) struct Setup {
    _server: Server,
    pub(super) root: PathBuf,
    t: PathBuf,
    pub(super) base: PathBuf,
    certs: Vec<(String, Vec<u8>)>,
}

/// `base:1` built in `root`.
fn build_base(base: &Path, root: &Path) {
    ok(jbuild(root)
        .args(["build", "-q", "-t", "base:1", "--platform", "freebsd/amd64"])
        .arg(base));
}

/// The repository served from 127.0.0.1, and `base:1` built in `root`: a
/// FreeBSD tree with `/lib`, `/usr/lib` and `/sbin/ldconfig`.
pub(super) fn setup(t: &Path, root: &Path) -> Setup {
    let key = Key::new(t, "repo");
    let certs = certificates(t);
    let www = t.join("www");
    let mut spec = RepoSpec::new(Layout::DataPkg, packages(&certs));
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.write(&www.join("FreeBSD:14:amd64/latest"));
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/${{ABI}}/latest", server.port);
    let base = t.join("base");
    freebsd_tree(&base.join("tree"), "amd64", &url, &key);
    for d in ["lib", "usr/lib", "sbin"] {
        fs::create_dir_all(base.join("tree").join(d)).unwrap();
    }
    // rc.d/ldconfig does nothing in an image without ldconfig.
    // The lines of FreeBSD's /etc/defaults/rc.conf rc.d/ldconfig reads.
    fs::create_dir_all(base.join("tree/etc/defaults")).unwrap();
    fs::write(
        base.join("tree/etc/defaults/rc.conf"),
        "ldconfig_paths=\"/usr/lib/compat ${_localbase}/lib ${_localbase}/lib/compat/pkg\"\n\
         ldconfig32_paths=\"/usr/lib32 /usr/lib32/compat\"\n\
         ldconfig_local_dirs=\"${_localbase}/libdata/ldconfig\"\n\
         ldconfig_local32_dirs=\"${_localbase}/libdata/ldconfig32\"\n",
    )
    .unwrap();
    let ldconfig = base.join("tree/sbin/ldconfig");
    fs::write(&ldconfig, b"ldconfig\n").unwrap();
    fs::set_permissions(&ldconfig, fs::Permissions::from_mode(0o555)).unwrap();
    fs::write(base.join("Jailfile"), "FROM scratch\nCOPY tree/ /\n").unwrap();
    build_base(&base, root);
    Setup {
        _server: server,
        root: root.to_path_buf(),
        t: t.to_path_buf(),
        base,
        certs,
    }
}

/// A recipe `FROM base:1` with `pkg_line`, in a directory of its own.
pub(super) fn recipe(s: &Setup, name: &str, pkg_line: &str) -> PathBuf {
    let dir = s.t.join("recipes").join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("Jailfile"), format!("FROM base:1\n{pkg_line}\n")).unwrap();
    dir
}

/// `db_dump185 -p FILE`: its key/data pairs, decoded (the printable
/// form: each byte as itself or `\hh`, `\\` for `\`).
fn db_dump185(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let out = Command::new("db_dump185")
        .arg("-p")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "db_dump185 {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let decode = |line: &str| {
        let b = line.as_bytes();
        let mut v = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\' && b.get(i + 1) == Some(&b'\\') {
                v.push(b'\\');
                i += 2;
            } else if b[i] == b'\\' {
                v.push(u8::from_str_radix(&line[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                v.push(b[i]);
                i += 1;
            }
        }
        v
    };
    let lines: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "HEADER=END")
        .skip(1)
        .take_while(|l| *l != "DATA=END")
        .collect();
    assert!(lines.len() % 2 == 0, "{text}");
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = lines
        .chunks(2)
        .map(|kv| (decode(kv[0]), decode(kv[1])))
        .collect();
    pairs.sort();
    pairs
}

/// What `pwd_mkdb` stores for `master.passwd` (`pwd_mkdb.c`, version 4
/// keys, big-endian; `../shared/notes/pkg-anyhost.md` §7.2), made here
/// from the text: `secure` keeps the password (`spwd.db`), else `*`.
fn pwd_records(master: &str, secure: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = vec![(b"\xffVERSION".to_vec(), vec![4u8])];
    let mut seen_uid = std::collections::BTreeSet::new();
    for (n, line) in master
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .enumerate()
    {
        let f: Vec<&str> = line.split(':').collect();
        assert_eq!(f.len(), 10, "{line}");
        let num = |s: &str| s.parse::<u32>().unwrap_or(0).to_be_bytes();
        let mut fields = 0u32;
        for (i, bit) in [(0, 0x1), (1, 0x2), (2, 0x4), (3, 0x8), (5, 0x10), (4, 0x20)]
            .into_iter()
            .chain([(7, 0x40), (8, 0x80), (9, 0x100), (6, 0x200)])
        {
            if !f[i].is_empty() {
                fields |= bit;
            }
        }
        let mut r = Vec::new();
        let mut s = |t: &str| {
            r.extend_from_slice(t.as_bytes());
            r.push(0);
        };
        s(f[0]);
        s(if secure { f[1] } else { "*" });
        r.extend_from_slice(&num(f[2]));
        r.extend_from_slice(&num(f[3]));
        r.extend_from_slice(&num(f[5]));
        for t in [f[4], f[7], f[8], f[9]] {
            r.extend_from_slice(t.as_bytes());
            r.push(0);
        }
        r.extend_from_slice(&num(f[6]));
        r.extend_from_slice(&fields.to_be_bytes());
        out.push(([b"A", f[0].as_bytes()].concat(), r.clone()));
        out.push((
            [&b"B"[..], &(n as u32 + 1).to_be_bytes()].concat(),
            r.clone(),
        ));
        if seen_uid.insert(f[2].to_string()) {
            out.push(([&b"C"[..], &num(f[2])].concat(), r));
        }
    }
    out.sort();
    out
}

/// The line of `path` in a `tar -tv` listing.
fn listed<'a>(listing: &'a str, path: &str) -> &'a str {
    listing
        .lines()
        .find(|l| l.ends_with(path))
        .unwrap_or_else(|| panic!("{path}: {listing}"))
}

#[test]
fn users_and_groups_of_both_templates_exist_in_the_accounts_and_the_layer() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let dir = recipe(&s, "users", "PKG --no-bootstrap redis git");
    let stdout = build_json(&s.root, &dir, "users:1");
    let said = said(&stdout);
    for line in [
        "redis-7.2.4: Creating user 'redis' with uid '535'",
        "git-2.45.2: Creating user 'git_daemon' with uid '964'.",
        "git-2.45.2: Using existing group 'jbappd'.",
        "git-2.45.2: Adding user 'git_daemon' to group 'jbappd'.",
    ] {
        assert!(said.contains(line), "{line}: {said}");
    }
    let (layout, rootfs) = export_unpacked(&s.root, "users:1", t.path());
    let etc = rootfs.join("etc");
    let master = fs::read_to_string(etc.join("master.passwd")).unwrap();
    assert_eq!(
        master,
        format!(
            "root:*:0:0::0:0:Charlie &:/root:/bin/sh\n\
             {USER}:*:{UID}:{UID}::0:0:a daemon:/nonexistent:/usr/sbin/nologin\n\
             redis:*:{REDIS}:{REDIS}::0:0:Redis Daemon:/var/db/redis:/usr/sbin/nologin\n\
             git_daemon:*:{GIT_DAEMON}:{GIT_DAEMON}::0:0:git daemon:/nonexistent:/usr/sbin/nologin\n"
        )
    );
    assert_eq!(
        fs::read_to_string(etc.join("group")).unwrap(),
        format!(
            "wheel:*:0:root\n{USER}:*:{UID}:git_daemon\nredis:*:{REDIS}:\n\
             git_daemon:*:{GIT_DAEMON}:\n"
        )
    );
    let passwd = fs::read_to_string(etc.join("passwd")).unwrap();
    assert!(
        passwd.contains(&format!(
            "redis:*:{REDIS}:{REDIS}:Redis Daemon:/var/db/redis:/usr/sbin/nologin\n"
        )),
        "{passwd}"
    );
    // The databases getpwnam(3) reads, read back by another program.
    assert_eq!(db_dump185(&etc.join("pwd.db")), pwd_records(&master, false));
    assert_eq!(db_dump185(&etc.join("spwd.db")), pwd_records(&master, true));
    // Owned in the step's layer by the users its own scripts made: the
    // home directory (`install -d -o redis -g redis`) and the files.
    let listing = last_layer_listing(&layout);
    let redis = format!("{REDIS}/{REDIS} ");
    assert!(listed(&listing, "var/db/redis/").starts_with(&format!("drwxr-xr-x {redis}")));
    assert!(listed(&listing, "var/db/redis/dump.rdb").starts_with(&format!("-rw-r----- {redis}")));
    assert!(listed(&listing, "usr/local/share/git/daemon-export")
        .starts_with(&format!("-rw-r--r-- {GIT_DAEMON}/{GIT_DAEMON} ")));
    assert!(listed(&listing, "etc/spwd.db").starts_with("-rw------- 0/0 "));
    assert!(listed(&listing, "etc/pwd.db").starts_with("-rw-r--r-- 0/0 "));
}

/// `/var/run/ld-elf.so.hints` as `elf-hints.h` defines it (`struct
/// elfhints_hdr`, little-endian on amd64): its directories.
fn hints_dirs(bytes: &[u8]) -> Vec<String> {
    let word = |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap()) as usize;
    assert!(bytes.len() >= 128, "{} bytes", bytes.len());
    assert_eq!(word(0), 0x746e_6845, "ELFHINTS_MAGIC");
    assert_eq!(word(1), 1, "version");
    let (strtab, strsize, dirlist, dirlistlen) = (word(2), word(3), word(4), word(5));
    assert!(dirlist + dirlistlen < strsize && strtab + strsize <= bytes.len());
    let list = &bytes[strtab + dirlist..strtab + dirlist + dirlistlen];
    assert_eq!(bytes[strtab + dirlist + dirlistlen], 0, "NUL-terminated");
    String::from_utf8(list.to_vec())
        .unwrap()
        .split(':')
        .map(str::to_string)
        .collect()
}

#[test]
fn ldconfig_in_a_post_install_writes_the_hints_of_the_images_library_directories() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let dir = recipe(&s, "libs", "PKG --no-bootstrap libbar");
    let stdout = build_json(&s.root, &dir, "libs:1");
    let said = said(&stdout);
    assert!(
        said.contains(
            "ldconfig: /var/run/ld-elf.so.hints: /lib:/usr/lib:/usr/local/lib:/usr/local/lib/bar"
        ),
        "{said}"
    );
    let (_, rootfs) = export_unpacked(&s.root, "libs:1", t.path());
    let hints = fs::read(rootfs.join("var/run/ld-elf.so.hints")).unwrap();
    // rc's order: /lib /usr/lib, then ldconfig_paths that exist, then
    // the directories listed under libdata/ldconfig.
    assert_eq!(
        hints_dirs(&hints),
        ["/lib", "/usr/lib", "/usr/local/lib", "/usr/local/lib/bar"]
    );
}

#[test]
fn certctl_rehash_links_each_certificate_by_its_openssl_subject_hash() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let dir = recipe(&s, "certs", "PKG --no-bootstrap caroot");
    build_json(&s.root, &dir, "certs:1");
    let (_, rootfs) = export_unpacked(&s.root, "certs:1", t.path());
    let linked = rootfs.join("etc/ssl/certs");
    let mut names: Vec<String> = fs::read_dir(&linked)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want = Vec::new();
    for (n, pem) in &s.certs {
        let out = Command::new("openssl")
            .args(["x509", "-hash", "-noout", "-in"])
            .arg(t.path().join(format!("{n}.pem")))
            .output()
            .unwrap();
        let hash = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let link = linked.join(format!("{hash}.0"));
        let target = fs::read_link(&link).unwrap_or_else(|e| panic!("{}: {e}", link.display()));
        // The link points at the certificate inside the image.
        let inside = if target.is_absolute() {
            rootfs.join(target.strip_prefix("/").unwrap())
        } else {
            linked.join(&target)
        };
        assert_eq!(&fs::read(&inside).unwrap(), pem, "{}", target.display());
        want.push(format!("{hash}.0"));
    }
    want.sort();
    assert_eq!(names, want);
}

#[test]
fn a_failing_pre_install_stops_the_step_and_a_failing_post_install_is_said() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let before = stored(&s.root);
    let dir = recipe(&s, "failpre", "PKG --no-bootstrap failpre");
    let out = run(jbuild(&s.root).args(["build", "-t", "failpre:1"]).arg(&dir));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for part in ["failpre-1.0", "`pre-install`", "status 1", "no way"] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
    assert_eq!(stored(&s.root), before, "nothing committed");

    let dir = recipe(&s, "failpost", "PKG --no-bootstrap failpost");
    let stdout = build_json(&s.root, &dir, "failpost:1");
    let said = said(&stdout);
    assert!(said.contains("failpost-1.0: post fails"), "{said}");
    assert!(
        said.contains("warning: its `post-install` shell script exited with status 2"),
        "{said}"
    );
    // The legacy `install` script ran twice, with pkg's arguments.
    for arg in ["PRE-INSTALL", "POST-INSTALL"] {
        let line = format!("install script: failpost-1.0 {arg} in / for failpost");
        assert!(said.contains(&line), "{line}: {said}");
    }
}

#[test]
fn two_fresh_builds_of_a_recipe_whose_scripts_write_databases_give_one_digest() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("one"));
    let dir = recipe(&s, "same", "PKG --no-bootstrap redis git libbar caroot");
    let mut digests = Vec::new();
    for root in ["one", "two"].map(|n| t.path().join(n)) {
        if !root.join("store").exists() {
            build_base(&s.base, &root);
        }
        let stdout = build_json(&root, &dir, "same:1");
        digests.push(json_result(&stdout)["manifest"].clone());
    }
    assert!(digests[0].is_string(), "{digests:?}");
    assert_eq!(digests[0], digests[1]);
}

/// The `deferred` events of a `--json` build: (package, script, command,
/// reason).
fn deferred_events(stdout: &str) -> Vec<(String, String, String, String)> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "deferred")
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (s("package"), s("script"), s("command"), s("reason"))
        })
        .collect()
}

#[test]
fn a_cache_rebuilder_is_deferred_to_the_first_start_and_said() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let dir = recipe(&s, "fonts", "PKG --no-bootstrap fonts");
    let stdout = build_json(&s.root, &dir, "fonts:1");
    let command = "fc-cache -s /usr/local/share/fonts/test";
    assert_eq!(
        deferred_events(&stdout),
        [(
            "fonts-1.0".to_string(),
            "post-install".to_string(),
            command.to_string(),
            "rebuilder".to_string()
        )],
        "{stdout}"
    );
    let (_, rootfs) = export_unpacked(&s.root, "fonts:1", t.path());
    let first = fs::read_to_string(rootfs.join("usr/local/etc/rc.d/jbuild_firstboot")).unwrap();
    assert!(first.contains(command), "{first}");
    assert!(rootfs.join("firstboot").exists());
}

#[test]
fn an_unknown_command_fails_the_step_naming_it_and_is_deferred_when_asked() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path(), &t.path().join("root"));
    let before = stored(&s.root);
    let dir = recipe(&s, "weird", "PKG --no-bootstrap weird");
    let out = run(jbuild(&s.root).args(["build", "-t", "weird:1"]).arg(&dir));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for part in [
        "weird-1.0",
        "`post-install`",
        "`frobnicate`",
        "line 2",
        "PKG --scripts=defer",
    ] {
        assert!(stderr.contains(part), "{part}: {stderr}");
    }
    assert_eq!(stored(&s.root), before, "nothing committed");

    let dir = recipe(
        &s,
        "weird-defer",
        "PKG --no-bootstrap --scripts=defer weird",
    );
    let stdout = build_json(&s.root, &dir, "weird:2");
    let command = "frobnicate --all /usr/local";
    assert_eq!(
        deferred_events(&stdout),
        [(
            "weird-1.0".to_string(),
            "post-install".to_string(),
            command.to_string(),
            "unknown".to_string()
        )],
        "{stdout}"
    );
    // What the script did before and after the command still happened.
    assert!(said(&stdout).contains("weird-1.0: setting up"), "{stdout}");
    let (_, rootfs) = export_unpacked(&s.root, "weird:2", t.path());
    let first = fs::read_to_string(rootfs.join("usr/local/etc/rc.d/jbuild_firstboot")).unwrap();
    assert!(first.contains(command), "{first}");
}
