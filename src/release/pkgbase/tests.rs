//! The pkgbase base without a FreeBSD host: the choice of method, the
//! repository and keys per release line, and the commands pkg gets, in
//! order, through a runner that records them.
use super::*;
use crate::blame::Blame;
use std::cell::RefCell;

fn amd64() -> Platform {
    Platform::parse("freebsd/amd64").unwrap()
}

fn source(keys: &Path) -> PkgbaseSource {
    PkgbaseSource {
        keys_dir: keys.to_path_buf(),
        pkg: Some("/usr/local/sbin/pkg".into()),
        ..Default::default()
    }
}

#[test]
fn sets_up_to_15_and_pkgbase_from_16_unless_asked() {
    let m = |c: BaseChoice, r: &str| c.method_for(r).unwrap();
    assert_eq!(m(BaseChoice::Auto, "14.3-RELEASE"), BaseMethod::Sets);
    assert_eq!(m(BaseChoice::Auto, "15.0-RELEASE"), BaseMethod::Sets);
    assert_eq!(m(BaseChoice::Auto, "16.0-CURRENT"), BaseMethod::Pkgbase);
    assert_eq!(m(BaseChoice::Auto, "16.0-RELEASE-p1"), BaseMethod::Pkgbase);
    assert_eq!(m(BaseChoice::Pkgbase, "15.0-RELEASE"), BaseMethod::Pkgbase);
    assert_eq!(m(BaseChoice::Sets, "16.0-RELEASE"), BaseMethod::Sets);
    let e = BaseChoice::Pkgbase.method_for("14.3-RELEASE").unwrap_err();
    assert!(e.is_user_error());
    assert!(e.to_string().contains("--freebsd-base=sets"), "{e}");
    assert_eq!("pkgbase".parse(), Ok(BaseChoice::Pkgbase));
    assert!("ports"
        .parse::<BaseChoice>()
        .unwrap_err()
        .contains("auto, sets or pkgbase"));
}

#[test]
fn the_repository_and_keys_follow_the_release_line() {
    let t = tempfile::tempdir().unwrap();
    let b = source(t.path()).resolve("15.0-RELEASE", &amd64()).unwrap();
    assert_eq!(b.abi, "FreeBSD:15:amd64");
    assert_eq!(
        b.url,
        "pkg+https://pkg.FreeBSD.org/FreeBSD:15:amd64/base_release_0"
    );
    assert_eq!(b.packages, ["FreeBSD-set-minimal-jail"]);
    // No host keys: FreeBSD's published pkgbase-15 fingerprints.
    assert_eq!(b.keys.name, "pkgbase-15");
    assert_eq!(b.keys.origin, "built in");
    assert_eq!(
        b.keys
            .files
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["trusted/awskms-15", "trusted/backup-signing-15"]
    );

    let arm = Platform::parse("freebsd/arm64").unwrap();
    // base_latest is signed with the ports keys, which must be on the host.
    let e = source(t.path()).resolve("16.0-CURRENT", &arm).unwrap_err();
    assert!(e.is_user_error());
    assert!(
        e.to_string().contains("pkg/trusted") && e.to_string().contains("pkg_keys_dir"),
        "{e}"
    );
    fs::create_dir_all(t.path().join("pkg/trusted")).unwrap();
    fs::write(t.path().join("pkg/trusted/k"), "fingerprint").unwrap();
    let b = source(t.path()).resolve("16.0-CURRENT", &arm).unwrap();
    assert_eq!(
        b.url,
        "pkg+https://pkg.FreeBSD.org/FreeBSD:16:aarch64/base_latest"
    );
    assert_eq!(b.keys.in_root(), "/usr/share/keys/pkg");
    // A configured repository gets the same variables.
    let mut s = source(t.path());
    s.url = Some("file:///repo/${ABI}/${VERSION_MAJOR}.${VERSION_MINOR}".into());
    let b = s.resolve("15.0-RELEASE", &amd64()).unwrap();
    assert_eq!(b.url, "file:///repo/FreeBSD:15:amd64/15.0");
    assert!(!b.repo_conf().contains("mirror_type"), "{}", b.repo_conf());
    assert!(b.repo_conf().contains("signature_type: \"fingerprints\""));
}

#[test]
fn host_keys_are_read_and_keyed() {
    let t = tempfile::tempdir().unwrap();
    let trusted = t.path().join("pkg/trusted");
    fs::create_dir_all(&trusted).unwrap();
    fs::create_dir_all(t.path().join("pkg/revoked")).unwrap();
    fs::write(
        trusted.join("k1"),
        "function: sha256\nfingerprint: \"aa\"\n",
    )
    .unwrap();
    let b = source(t.path()).resolve("16.0-CURRENT", &amd64()).unwrap();
    assert_eq!(b.keys.name, "pkg");
    assert_eq!(b.keys.origin, t.path().join("pkg").display().to_string());
    let before = b.identity("etag 1");
    fs::write(
        trusted.join("k1"),
        "function: sha256\nfingerprint: \"bb\"\n",
    )
    .unwrap();
    let b2 = source(t.path()).resolve("16.0-CURRENT", &amd64()).unwrap();
    assert_ne!(before, b2.identity("etag 1"), "other keys, another base");
    assert_ne!(b2.identity("etag 1"), b2.identity("etag 2"));
}

#[test]
fn jbuild_installs_unless_pkg_is_asked_for() {
    let t = tempfile::tempdir().unwrap();
    let mut s = source(t.path());
    let by_pkg = s.resolve("15.0-RELEASE", &amd64()).unwrap();
    assert_eq!(
        by_pkg.installer,
        Installer::Pkg("/usr/local/sbin/pkg".into())
    );
    s.pkg = None;
    let by_jbuild = s.resolve("15.0-RELEASE", &amd64()).unwrap();
    assert_eq!(by_jbuild.installer, Installer::Jbuild);
    // Each installer leaves its own database: each has its own key.
    assert_ne!(by_pkg.identity("c"), by_jbuild.identity("c"));
    // The ABI the installer chooses packages by, from the release and
    // the platform (pkg's name for arm64).
    let arm = Platform::parse("freebsd/arm64").unwrap();
    let arm = s.resolve("15.0-RELEASE", &arm).unwrap();
    assert_eq!((arm.version(), arm.pkg_arch()), ((15, 0), "aarch64"));
}

#[test]
fn a_host_that_cannot_run_pkg_says_what_to_use_instead() {
    let s = PkgbaseSource {
        use_pkg: true,
        ..Default::default()
    };
    let r = s.resolve("15.0-RELEASE", &amd64());
    if cfg!(target_os = "freebsd") {
        assert_eq!(r.unwrap().installer, Installer::Pkg("pkg".into()));
    } else {
        let e = r.unwrap_err();
        assert!(e.is_user_error());
        let m = e.to_string();
        assert!(
            m.contains("pkg(8)")
                && m.contains(std::env::consts::OS)
                && m.contains("[pkg] installer")
                && m.contains("on FreeBSD"),
            "{m}"
        );
    }
}

/// Stands in for the host: records each command line and what the
/// root held when it ran, and installs a file for `install`.
#[derive(Default)]
struct Recorder {
    log: RefCell<Vec<Vec<String>>>,
    keys_seen: RefCell<Vec<bool>>,
    conf_seen: RefCell<Vec<String>>,
    fail: Option<&'static str>,
}

impl PkgRunner for Recorder {
    fn run(&self, argv: &[String], out: Output<'_>) -> io::Result<Option<String>> {
        self.log.borrow_mut().push(argv.to_vec());
        let root = Path::new(&argv[2]);
        self.keys_seen.borrow_mut().push(
            root.join("usr/share/keys/pkgbase-15/trusted/awskms-15")
                .is_file()
                && root.join("usr/share/keys/pkgbase-15/revoked").is_dir(),
        );
        let conf = fs::read_to_string(Path::new(&argv[4]).join("FreeBSD-base.conf")).unwrap();
        self.conf_seen.borrow_mut().push(conf);
        out(Stream::Stdout, format!("ran {}", argv[11]).as_bytes());
        if self.fail.is_some_and(|f| argv.iter().any(|a| a == f)) {
            return Ok(Some("exit status: 3: pkg: No packages available".into()));
        }
        if argv[11] == "install" {
            fs::create_dir_all(root.join("bin")).unwrap();
            fs::write(root.join("bin/freebsd-version"), "15.0").unwrap();
        }
        Ok(None)
    }
}

#[test]
fn install_seeds_the_keys_then_updates_then_installs() {
    let t = tempfile::tempdir().unwrap();
    let mut s = source(t.path());
    s.sets.push("lib32".into());
    let b = s.resolve("15.0-RELEASE", &amd64()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let rec = Recorder::default();
    let mut lines = Vec::new();
    let pkg = Path::new("/usr/local/sbin/pkg");
    b.install(pkg, root.path(), &rec, &mut |_, l: &[u8]| {
        lines.push(String::from_utf8_lossy(l).into_owned())
    })
    .unwrap();
    let log = rec.log.borrow();
    let conf_dir = log[0][4].clone();
    let r = root.path().display().to_string();
    // pkg(8): global options (-r/--rootdir, -R/--repo-conf-dir, -o)
    // before the command; `-r` after it names the repository.
    let global = [
        "/usr/local/sbin/pkg",
        "--rootdir",
        &r,
        "--repo-conf-dir",
        &conf_dir,
        "-o",
        "ABI=FreeBSD:15:amd64",
        "-o",
        "IGNORE_OSVERSION=yes",
        "-o",
        "ASSUME_ALWAYS_YES=yes",
    ];
    let with =
        |cmd: &[&str]| -> Vec<String> { global.iter().chain(cmd).map(|s| s.to_string()).collect() };
    assert_eq!(
        *log,
        [
            with(&["update", "-r", "FreeBSD-base"]),
            with(&[
                "install",
                "-y",
                "-r",
                "FreeBSD-base",
                "FreeBSD-set-minimal-jail",
                "FreeBSD-set-lib32"
            ]),
        ]
    );
    assert!(
        !conf_dir.starts_with(&r),
        "the configuration stays out of the root"
    );
    assert_eq!(
        *rec.keys_seen.borrow(),
        [true, true],
        "keys before pkg runs"
    );
    assert_eq!(
        rec.conf_seen.borrow()[0],
        "FreeBSD-base: {\n  url: \"pkg+https://pkg.FreeBSD.org/FreeBSD:15:amd64/base_release_0\",\n  mirror_type: \"srv\",\n  signature_type: \"fingerprints\",\n  fingerprints: \"/usr/share/keys/pkgbase-15\",\n  enabled: yes\n}\n"
    );
    assert!(
        !Path::new(&conf_dir).exists(),
        "the configuration is removed"
    );
    assert_eq!(lines, ["ran update", "ran install"]);
    assert!(root.path().join("bin/freebsd-version").is_file());
}

#[test]
fn a_failing_pkg_stops_with_its_command_and_message() {
    let t = tempfile::tempdir().unwrap();
    let b = source(t.path()).resolve("15.0-RELEASE", &amd64()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let rec = Recorder {
        fail: Some("install"),
        ..Default::default()
    };
    let pkg = Path::new("/usr/local/sbin/pkg");
    let e = b
        .install(pkg, root.path(), &rec, &mut |_, _: &[u8]| {})
        .unwrap_err();
    assert!(e.is_user_error());
    let m = e.to_string();
    assert!(
        m.contains("install -y -r FreeBSD-base FreeBSD-set-minimal-jail"),
        "{m}"
    );
    assert!(m.contains("No packages available"), "{m}");

    let mut s = source(t.path());
    s.pkg = Some(t.path().join("no-such-pkg"));
    let b = s.resolve("15.0-RELEASE", &amd64()).unwrap();
    let e = b
        .install(
            &t.path().join("no-such-pkg"),
            root.path(),
            &HostPkg,
            &mut |_, _: &[u8]| {},
        )
        .unwrap_err();
    assert!(e.is_user_error());
    assert!(e.to_string().contains("no-such-pkg"), "{e}");
}
