//! `FROM freebsd:15.0` from a pkgbase repository, built on Linux by
//! jbuild's own installer through the `jbuild` binary: a test repository
//! written by `tests/support/pkgrepo` (FreeBSD-* packages whose closure is
//! `FreeBSD-set-minimal-jail`: the accounts and `/bin/sh` from a
//! FreeBSD-runtime-like package with FreeBSD-runtime's post-install
//! script — `pwd_mkdb`, `services_mkdb`, `cap_mkdb`, `chmod 1777 /tmp` —,
//! a file with a flag, files owned by names those accounts define), signed with the `openssl` program, trusted
//! through `[freebsd] pkg_keys_dir` as the host's `/usr/share/keys`,
//! served from 127.0.0.1 under `${ABI}/base_release_${VERSION_MINOR}`.
//! The image's tree (GNU tar, bsdtar for the flag) and its `local.sqlite`
//! (the `sqlite3` program) are what pkg would leave; two roots give one
//! digest; arm64 reads the `FreeBSD:15:aarch64` catalogue; a tampered
//! catalogue stops the build naming the repository.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::pkg::{last_layer, last_layer_listing, packages, serve, sqlite};
use crate::support::common::{export_unpacked, jbuild, run};
use crate::support::layer::bsdtar_flags;
use crate::support::limits::Server;
use crate::support::pkgrepo::elf::{freebsd_elf, EM_AARCH64, EM_X86_64};
use crate::support::pkgrepo::image::with;
use crate::support::pkgrepo::pkgfile::{config, dir, file, owned, Item};
use crate::support::pkgrepo::scripts::RUNTIME;
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing, TestPkg};

/// FreeBSD's numbers for accounts a Debian host has other numbers for
/// (`mail` is 8 there) or lacks (`unbound`).
const UNBOUND: u32 = 59;
const MAIL: u32 = 6;

/// `/etc/services` and `/etc/login.conf` as FreeBSD-runtime ships them,
/// a few lines of each.
const SERVICES: &str = "ssh\t\t22/tcp\t\t#Secure Shell Login\nssh\t\t22/udp\n\
     domain\t\t53/udp\t   dns\t#Domain Name Server\n";
const LOGIN_CONF: &str = "default:\\\n\t:path=/sbin /bin /usr/sbin /usr/bin:\\\n\t:umask=022:\n\n\
     daemon:\\\n\t:tc=default:\n";

/// The base packages for `arch` (`amd64`, `arm64`): the set's closure and
/// one package outside it.
fn base_packages(arch: &str) -> Vec<TestPkg> {
    let machine = if arch == "arm64" {
        EM_AARCH64
    } else {
        EM_X86_64
    };
    let libc = Item::File {
        path: "/lib/libc.so.7".into(),
        mode: 0o444,
        uname: "root".into(),
        gname: "wheel".into(),
        content: format!("libc for {arch}\n").into_bytes(),
        flags: Some("schg".into()),
        config: false,
    };
    let runtime = vec![
        dir("/etc", 0o755, "root", "wheel"),
        config(
            "/etc/master.passwd",
            0o600,
            "wheel",
            format!("root:*:0:0::0:0:Charlie &:/root:/bin/sh\nunbound:*:{UNBOUND}:{UNBOUND}::0:0:Unbound DNS Resolver:/var/unbound:/usr/sbin/nologin\n").as_bytes(),
        ),
        file(
            "/etc/passwd",
            0o644,
            format!("root:*:0:0:Charlie &:/root:/bin/sh\nunbound:*:{UNBOUND}:{UNBOUND}:Unbound DNS Resolver:/var/unbound:/usr/sbin/nologin\n").as_bytes(),
        ),
        config(
            "/etc/group",
            0o644,
            "wheel",
            format!("wheel:*:0:root\nmail:*:{MAIL}:\nunbound:*:{UNBOUND}:\n").as_bytes(),
        ),
        file("/bin/sh", 0o555, &freebsd_elf(machine, true, 1_500_000, "FreeBSD")),
        libc,
        config("/etc/services", 0o644, "wheel", SERVICES.as_bytes()),
        config("/etc/login.conf", 0o644, "wheel", LOGIN_CONF.as_bytes()),
        dir("/tmp", 0o755, "root", "wheel"),
    ];
    let utilities = vec![
        file("/usr/bin/uname", 0o555, b"uname\n"),
        owned("/usr/libexec/dma", 0o2555, "root", "mail", b"dma\n"),
        dir("/var/unbound", 0o755, "unbound", "unbound"),
        owned(
            "/var/unbound/unbound.conf",
            0o644,
            "unbound",
            "unbound",
            b"server:\n",
        ),
    ];
    let base = |name: &str, deps: &[&str], items: Vec<Item>| {
        let mut p = with(name, "15.0", deps, items, vec![]);
        p.origin = format!("base/{name}");
        p
    };
    vec![
        {
            // FreeBSD-runtime's post-install (release/packages/runtime.ucl).
            let mut p = with(
                "FreeBSD-runtime",
                "15.0",
                &[],
                runtime,
                vec![("scripts", serde_json::json!({ "post-install": RUNTIME }))],
            );
            p.origin = "base/FreeBSD-runtime".into();
            p
        },
        base("FreeBSD-utilities", &["FreeBSD-runtime"], utilities),
        base(
            "FreeBSD-set-minimal-jail",
            &["FreeBSD-runtime", "FreeBSD-utilities"],
            vec![],
        ),
        base(
            "FreeBSD-src",
            &[],
            vec![file("/usr/src/README", 0o644, b"src\n")],
        ),
    ]
}

/// Writes the repository of `abi` for `arch` under `www`, signed by `key`.
fn write_base_repo(www: &Path, abi: &str, arch: &str, key: &Key, tamper: bool) {
    let mut spec = RepoSpec::new(Layout::DataPkg, base_packages(arch));
    spec.signing = Signing::Fingerprints(vec![("pkgbase".into(), key.clone())]);
    spec.abi = abi.into();
    spec.tamper = tamper;
    spec.write(&www.join(abi).join("base_release_0"));
}

struct Setup {
    server: Server,
    www: PathBuf,
    key: Key,
    config: PathBuf,
    ctx: PathBuf,
}

/// The repositories for amd64 and arm64, the key trusted where the host's
/// `/usr/share/keys/pkgbase-15` would be, and `FROM freebsd:15.0`.
fn setup(t: &Path) -> Setup {
    let key = Key::new(t, "pkgbase");
    let www = t.join("www");
    write_base_repo(&www, "FreeBSD:15:amd64", "amd64", &key, false);
    write_base_repo(&www, "FreeBSD:15:aarch64", "arm64", &key, false);
    let server = serve(www.clone());
    let keys = t.join("keys");
    key.trust_in(&keys.join("pkgbase-15/trusted"), "test");
    let config = t.join("config.toml");
    fs::write(
        &config,
        format!(
            "[freebsd]\nmirror = \"http://127.0.0.1:1/no-mirror\"\nmanifests_dir = \"{}\"\n\
             pkgbase_url = \"http://127.0.0.1:{}/${{ABI}}/base_release_${{VERSION_MINOR}}\"\n\
             pkg_keys_dir = \"{}\"\n",
            t.join("no-manifests").display(),
            server.port,
            keys.display()
        ),
    )
    .unwrap();
    let ctx = t.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("Jailfile"), "FROM freebsd:15.0\n").unwrap();
    Setup {
        server,
        www,
        key,
        config,
        ctx,
    }
}

/// `jbuild --json build --freebsd-base pkgbase` in `root`: its exit
/// code, its events and its stderr.
fn build(s: &Setup, root: &Path, platform: &str, tag: &str) -> (Option<i32>, Vec<Value>, String) {
    let out = run(jbuild(root)
        .env("JBUILD_CONFIG", &s.config)
        .args(["--json", "build", "--freebsd-base", "pkgbase", "--platform"])
        .args([platform, "-t", tag])
        .arg(&s.ctx));
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), events, stderr)
}

fn result(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["event"] == "result")
        .unwrap_or_else(|| panic!("no result in {events:?}"))
}

/// The lines the steps printed.
fn output(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] == "output")
        .filter_map(|e| e["line"].as_str().map(str::to_string))
        .collect()
}

/// The paths asked of the server, `:` unescaped.
fn asked(s: &Setup) -> Vec<String> {
    s.server
        .requests()
        .iter()
        .map(|r| r.path.replace("%3A", ":"))
        .collect()
}

/// How many times each of `paths` is in `asked`.
fn times(asked: &[String], paths: &[&str]) -> Vec<usize> {
    paths
        .iter()
        .map(|p| asked.iter().filter(|a| a == p).count())
        .collect()
}

#[test]
fn a_pkgbase_base_builds_on_linux_with_jbuilds_installer() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    let root = t.path().join("root");
    let (code, events, stderr) = build(&s, &root, "freebsd/amd64", "base:15");
    assert_eq!(code, Some(0), "{stderr}\n{events:?}");
    // The set's closure in dependency order, nothing else: no FreeBSD-src,
    // and no `pkg` (the base repository has none to bootstrap).
    let closure = [
        "FreeBSD-runtime-15.0",
        "FreeBSD-utilities-15.0",
        "FreeBSD-set-minimal-jail-15.0",
    ];
    assert_eq!(packages(&events, "fetched"), closure, "{events:?}");
    assert_eq!(packages(&events, "installed"), closure, "{events:?}");
    let first = result(&events)["manifest"].clone();
    assert!(first.is_string(), "{events:?}");
    let repo = "/FreeBSD:15:amd64/base_release_0";
    let asked_first = asked(&s);
    assert!(
        asked_first.iter().all(|p| p.starts_with(repo)),
        "only the amd64 repository is read: {asked_first:?}"
    );
    assert!(!asked_first.iter().any(|p| p.contains("FreeBSD-src")));
    // The catalogue is fetched once, as pkg reads it (meta.conf, then
    // data.pkg): the fetch phase keys the base on it and keeps it, and the
    // install reads the kept copy.
    let meta = format!("{repo}/meta.conf");
    let catalogue = format!("{repo}/data.pkg");
    assert_eq!(
        times(&asked_first, &[&meta, &catalogue]),
        [1, 1],
        "{asked_first:?}"
    );
    // FreeBSD-runtime's files (root's, wheel's) go into a root with no
    // accounts yet: no warning for them, nor for any later file (every
    // name resolves once FreeBSD-runtime is in).
    let said = output(&events);
    assert!(
        said.iter()
            .any(|l| l.contains("FreeBSD-runtime-15.0: installed")),
        "{said:?}"
    );
    let noise: Vec<&String> = said
        .iter()
        .filter(|l| l.contains("the image has no"))
        .collect();
    assert!(noise.is_empty(), "{noise:?}");
    assert!(!stderr.contains("the image has no"), "{stderr}");

    let (layout, rootfs) = export_unpacked(&root, "base:15", t.path());
    assert_eq!(
        fs::read_to_string(rootfs.join("etc/group")).unwrap(),
        format!("wheel:*:0:root\nmail:*:{MAIL}:\nunbound:*:{UNBOUND}:\n")
    );
    assert_eq!(
        &fs::read(rootfs.join("bin/sh")).unwrap()[18..20],
        EM_X86_64.to_le_bytes()
    );
    // The keys as pkg(8) would have left them; the catalogue and the
    // packages nowhere in the image.
    assert!(rootfs
        .join("usr/share/keys/pkgbase-15/trusted/test")
        .is_file());
    assert!(rootfs.join("usr/share/keys/pkgbase-15/revoked").is_dir());
    for gone in ["var/db/pkg/repos", "var/cache/pkg", "usr/src"] {
        assert!(!rootfs.join(gone).exists(), "{gone} is in the image");
    }
    let db = rootfs.join("var/db/pkg/local.sqlite");
    assert_eq!(
        sqlite(
            &db,
            "SELECT name, version, origin, automatic FROM packages ORDER BY name"
        ),
        "FreeBSD-runtime|15.0|base/FreeBSD-runtime|1\n\
         FreeBSD-set-minimal-jail|15.0|base/FreeBSD-set-minimal-jail|0\n\
         FreeBSD-utilities|15.0|base/FreeBSD-utilities|1\n"
    );
    assert_eq!(
        sqlite(&db, "SELECT DISTINCT arch FROM packages"),
        "FreeBSD:15:amd64\n"
    );
    // The files pkg check -s would check, with their packages.
    assert_eq!(
        sqlite(
            &db,
            "SELECT p.name, f.path FROM files f JOIN packages p ON p.id = f.package_id \
             WHERE f.path IN ('/etc/group', '/var/unbound/unbound.conf') ORDER BY f.path"
        ),
        "FreeBSD-runtime|/etc/group\nFreeBSD-utilities|/var/unbound/unbound.conf\n"
    );
    assert_eq!(sqlite(&db, "PRAGMA integrity_check"), "ok\n");

    // Owners by the names the runtime package's accounts define, modes
    // (setgid) as packaged; the flag reaches the layer.
    let listing = last_layer_listing(&layout);
    let line = |path: &str| {
        listing
            .lines()
            .find(|l| l.ends_with(path))
            .unwrap_or_else(|| panic!("{path}: {listing}"))
            .to_string()
    };
    let unbound = format!("{UNBOUND}/{UNBOUND} ");
    assert!(line("var/unbound/unbound.conf").starts_with(&format!("-rw-r--r-- {unbound}")));
    assert!(line("var/unbound/").starts_with(&format!("drwxr-xr-x {unbound}")));
    assert!(line("usr/libexec/dma").starts_with(&format!("-r-xr-sr-x 0/{MAIL} ")));
    assert!(line("etc/master.passwd").starts_with("-rw------- 0/0 "));
    // FreeBSD-runtime's post-install ran: the password databases (read
    // back by db_dump185), services.db, login.conf.db, /tmp 1777.
    assert!(
        line("tmp/").starts_with("drwxrwxrwt 0/0 "),
        "{}",
        line("tmp/")
    );
    let keys = |file: &str| -> String {
        let out = std::process::Command::new("db_dump185")
            .arg("-p")
            .arg(rootfs.join(file))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let pwd = keys("etc/pwd.db");
    for key in ["Aroot", "Aunbound"] {
        assert!(pwd.lines().any(|l| l == key), "{key}: {pwd}");
    }
    assert!(keys("etc/spwd.db").lines().any(|l| l == "Aunbound"));
    assert!(keys("var/db/services.db").contains("ssh"));
    assert!(keys("etc/login.conf.db").lines().any(|l| l == "default"));
    assert!(line("etc/spwd.db").starts_with("-rw------- 0/0 "));
    let flags = bsdtar_flags(&last_layer(&layout));
    assert_eq!(flags.get("lib/libc.so.7").map(String::as_str), Some("schg"));
    assert_eq!(flags.get("bin/sh").map(String::as_str), Some(""));

    // Built again: the catalogue is asked once (its digest is the key) and
    // the base is reused; in another root, the same image, the catalogue
    // asked once again.
    let (code, again, stderr) = build(&s, &root, "freebsd/amd64", "base:15");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(packages(&again, "fetched").is_empty(), "{again:?}");
    assert_eq!(result(&again)["manifest"], first);
    let since: Vec<String> = asked(&s)[asked_first.len()..].to_vec();
    assert_eq!(since, [meta.clone(), catalogue.clone()]);
    let before_other = asked(&s).len();
    let (code, other, stderr) = build(&s, &t.path().join("root2"), "freebsd/amd64", "base:15");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(packages(&other, "installed"), closure, "{other:?}");
    assert_eq!(result(&other)["manifest"], first);
    let since = asked(&s)[before_other..].to_vec();
    assert_eq!(times(&since, &[&meta, &catalogue]), [1, 1], "{since:?}");
}

#[test]
fn an_arm64_base_reads_the_arm64_catalogue_on_an_amd64_host() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    let root = t.path().join("root");
    let (code, events, stderr) = build(&s, &root, "freebsd/arm64", "base:arm");
    assert_eq!(code, Some(0), "{stderr}\n{events:?}");
    let asked = asked(&s);
    assert!(
        asked.contains(&"/FreeBSD:15:aarch64/base_release_0/data.pkg".to_string())
            && asked.iter().all(|p| p.starts_with("/FreeBSD:15:aarch64/")),
        "{asked:?}"
    );
    let (_, rootfs) = export_unpacked(&root, "base:arm", t.path());
    assert_eq!(
        &fs::read(rootfs.join("bin/sh")).unwrap()[18..20],
        EM_AARCH64.to_le_bytes()
    );
    assert_eq!(
        sqlite(
            &rootfs.join("var/db/pkg/local.sqlite"),
            "SELECT DISTINCT arch FROM packages"
        ),
        "FreeBSD:15:aarch64\n"
    );
}

#[test]
fn a_tampered_pkgbase_catalogue_stops_the_build_naming_the_repository() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    write_base_repo(&s.www, "FreeBSD:15:amd64", "amd64", &s.key, true);
    let root = t.path().join("root");
    let (code, events, stderr) = build(&s, &root, "freebsd/amd64", "base:bad");
    assert_eq!(code, Some(1), "{stderr}\n{events:?}");
    assert!(
        stderr.contains("Jailfile:1")
            && stderr.contains("repository `FreeBSD-base`")
            && stderr.contains("does not match the catalogue"),
        "{stderr}"
    );
    assert!(packages(&events, "installed").is_empty(), "{events:?}");
    let images = String::from_utf8_lossy(&run(jbuild(&root).arg("images")).stdout).into_owned();
    assert!(
        !images.contains("base:bad") && !images.contains("bad"),
        "{images}"
    );
}
