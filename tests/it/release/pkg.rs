//! PKG steps on a generated release base (the package cache shared, caches
//! kept out of layers, a repository's catalogue followed, jail parameters
//! that weaken the build jail refused without consent) and pkgbase bases
//! installed by a stand-in pkg(8) (`[freebsd] pkg`), whose argv and order
//! are checked.

use super::*;

#[test]
fn pkg_shares_its_cache_keeps_caches_out_of_layers_and_follows_the_catalogue() {
    need!(Root, Busybox);
    let bb = static_busybox().expect("the busybox lane found it");
    let t = tempfile::tempdir().unwrap();
    let mirror = t.path().join("mirror");
    make_release(&mirror, &xz(&base_tar(Some(&bb))));
    let server = Server::start(&mirror);
    // A local repository (file://) whose catalogue the key follows.
    let repo = t.path().join("repo/FreeBSD:14:amd64");
    fs::create_dir_all(&repo).unwrap();
    fs::write(repo.join("packagesite.pkg"), "catalogue v1").unwrap();
    let repos = t.path().join("repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(
        repos.join("local.conf"),
        format!(
            "FreeBSD: {{ enabled: no }}\nlocal: {{ url: \"file://{}/repo/${{ABI}}\" }}\n",
            t.path().display()
        ),
    )
    .unwrap();
    let config = t.path().join("config.toml");
    fs::write(
        &config,
        // pkg(8) in the build jail (a stand-in, as jbuild's installer
        // needs a real repository: see build::pkg for that).
        format!(
            "[pkg]\nrepos_dir = \"{}\"\ninstaller = \"pkg\"\n",
            repos.display()
        ),
    )
    .unwrap();
    let root = t.path().join("root");
    let ctx = context(t.path(), "FROM freebsd:14.3\nPKG nginx\n");
    let build = || {
        let mut c = build_cmd(&root, &server, &ctx, &config);
        c.args(["-t", "web:1"]);
        result(&ok(&mut c))
    };

    let first = build();
    assert_eq!(first["steps_run"], 1, "{first}");
    // The package landed in the shared cache on the host (the cache mount
    // of /var/cache/pkg, as `RUN --mount=type=cache,target=/var/cache/pkg`
    // would have it)...
    assert_eq!(
        fs::read_to_string(root.join("cache/mounts/%2Fvar%2Fcache%2Fpkg/nginx.pkg")).unwrap(),
        "package\n"
    );
    let layers = exported_layers(&root, "web:1", &t.path().join("oci1"));
    let pkg_layer = &layers[1];
    let installed =
        String::from_utf8_lossy(&pkg_layer["usr/local/sbin/installed"].content).to_string();
    assert!(
        installed.starts_with("install\n-y\nnginx\nASSUME_ALWAYS_YES=yes\nlocal.conf\n"),
        "{installed}"
    );
    // ... and neither it nor pkg's catalogue copy is in the layer; the
    // repository override was visible to the step only.
    for (path, _) in pkg_layer.iter() {
        assert!(
            !path.starts_with("var/cache/pkg/") && !path.starts_with("var/db/pkg/repos/"),
            "{path} reached the layer"
        );
        assert!(
            !path.starts_with("usr/local/etc/pkg"),
            "{path} reached the layer"
        );
    }

    // Same catalogue: cached. New catalogue: the PKG step runs again, and
    // finds the package from the first run in the shared cache.
    assert_eq!(build()["steps_run"], 0);
    fs::write(repo.join("packagesite.pkg"), "catalogue v2").unwrap();
    let third = build();
    assert_eq!(third["steps_run"], 1, "{third}");
    assert_ne!(third["manifest"], first["manifest"]);
    let layers = exported_layers(&root, "web:1", &t.path().join("oci2"));
    let installed =
        String::from_utf8_lossy(&layers[1]["usr/local/sbin/installed"].content).to_string();
    assert!(installed.contains("cached: nginx.pkg"), "{installed}");

    // Offline, the catalogue is not consulted: a newer one changes nothing.
    let mut c = build_cmd(&root, &server, &ctx, &config);
    let offline1 = result(&ok(c.args(["--pkg-offline", "-t", "web:off"])));
    fs::write(repo.join("packagesite.pkg"), "catalogue v3").unwrap();
    let mut c = build_cmd(&root, &server, &ctx, &config);
    let offline2 = result(&ok(c.args(["--pkg-offline", "-t", "web:off"])));
    assert_eq!(offline1["steps_run"], 1);
    assert_eq!(offline2["steps_run"], 0);
}

#[test]
fn jail_parameters_that_weaken_the_build_jail_need_consent() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let config = t.path().join("config.toml");
    fs::write(&config, "").unwrap();
    let build = |ctx: &Path, extra: &[&str], config: &Path| {
        let mut c = jbuild(&root);
        c.env("JBUILD_CONFIG", config)
            .arg("build")
            .args(extra)
            .arg(ctx);
        run(&mut c)
    };
    // Parameters only stored for the runtime jail need no consent, and the
    // ones that act on the host are simply not used while building.
    let stored = context(
        &t.path().join("a"),
        "FROM scratch\nSYSRC a=b\nJAIL allow.raw_sockets=1 devfs_ruleset=0 exec.start=\"/bin/sh /etc/rc\" host.hostname=web\n",
    );
    let out = build(&stored, &[], &config);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A RUN step after them would run in a weakened jail: refused before
    // anything runs, naming the JAIL line.
    let ctx = context(
        &t.path().join("b"),
        "FROM scratch\nJAIL allow.set_hostname=1 securelevel=3 exec.start=/bin/sh\nJAIL allow.raw_sockets=1 devfs_ruleset=0\nRUN [\"/bin/true\"]\n",
    );
    let out = build(&ctx, &[], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Jailfile:3")
            && stderr.contains("allow.raw_sockets=1")
            && stderr.contains("line 4")
            && stderr.contains("--allow-jail-param allow.raw_sockets"),
        "{stderr}"
    );
    // One consent is not two.
    let out = build(&ctx, &["--allow-jail-param", "allow.raw_sockets"], &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("devfs_ruleset=0"),
        "{stderr}"
    );
    // With both, the check passes and the step itself runs (and, in this
    // empty root, finds no /bin/true).
    let both = [
        "--allow-jail-param",
        "allow.raw_sockets",
        "--allow-jail-param",
        "devfs_ruleset",
    ];
    let out = build(&ctx, &both, &config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("--allow-jail-param"), "{stderr}");
    // The configuration file can give the consent as well.
    fs::write(
        &config,
        "[freebsd]\nallow_jail_params = [\"allow.raw_sockets\", \"devfs_ruleset\"]\n",
    )
    .unwrap();
    let out = build(&ctx, &[], &config);
    let stderr2 = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr2.contains("--allow-jail-param"), "{stderr2}");
    assert_eq!(out.status.code(), Some(1));
}

/// PKG keys follow an HTTP repository's catalogue by its content's
/// digest (not an ETag): a new `packagesite.pkg` is a new key; the
/// archives are asked in pkg's order (`meta.conf`, then `data.pkg`,
/// `data.<packing_format>`, `packagesite.pkg`,
/// `packagesite.<packing_format>`), as the step reads them:
/// `packagesite.txz` when `meta.conf` says `txz`.
#[test]
fn an_http_repository_is_keyed_on_its_catalogue_digest() {
    let t = tempfile::tempdir().unwrap();
    let served = t.path().join("www");
    let repo = served.join("repo/FreeBSD:14:amd64/latest");
    fs::create_dir_all(&repo).unwrap();
    fs::write(repo.join("packagesite.pkg"), "catalogue 1").unwrap();
    let server = Server::start(&served);
    let repos = t.path().join("repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(
        repos.join("mine.conf"),
        format!(
            "FreeBSD: {{ enabled: no }}\nmine: {{ url: \"pkg+{}/repo/${{ABI}}/latest\", mirror_type: \"none\" }}\n",
            server.url
        ),
    )
    .unwrap();
    let env = jbuild::engine::FreeBsdEnv {
        pkg_repos_dir: Some(repos),
        ..Default::default()
    };
    // The step's root: FreeBSD 14.3, no repository of its own.
    let root = t.path().join("root");
    fs::create_dir_all(root.join("bin")).unwrap();
    fs::write(
        root.join("bin/freebsd-version"),
        "USERLAND_VERSION=\"14.3-RELEASE\"\n",
    )
    .unwrap();
    // Each call is a build of its own (a catalogue is kept for one build).
    let key = || {
        let mut kept = jbuild::pkg::repository_files::Kept::new();
        env.pkg_root(Some(&root), "amd64", None, &mut kept)
    };
    let first = key().unwrap();
    assert_eq!(first, key().unwrap());
    fs::write(repo.join("packagesite.pkg"), "catalogue 2").unwrap();
    let second = key().unwrap();
    assert_ne!(first, second);
    fs::remove_file(repo.join("packagesite.pkg")).unwrap();
    fs::write(repo.join("meta.conf"), "packing_format = \"txz\";\n").unwrap();
    fs::write(repo.join("packagesite.txz"), "old style").unwrap();
    let third = key().unwrap();
    assert_ne!(second, third);
    fs::remove_file(repo.join("packagesite.txz")).unwrap();
    let e = key().unwrap_err().to_string();
    assert!(e.contains("--pkg-offline"), "{e}");
    let asked = server.requests();
    assert!(
        asked
            .iter()
            .all(|r| r.starts_with("GET /repo/FreeBSD:14:amd64/latest/")),
        "{asked:?}"
    );
    // meta.conf (none), meta.txz (none: pkg's older meta), data.pkg,
    // data.tzst and packagesite.pkg three times; then meta.conf (txz),
    // data.pkg, data.txz, packagesite.pkg and packagesite.txz twice.
    assert_eq!(asked.len(), 25, "{asked:?}");
}

/// Stands in for pkg(8) on the host (the real one runs on FreeBSD only):
/// logs its command line, the repository configuration and the keys the
/// root holds when it runs, and installs into `--rootdir` what pkg would
/// leave there. A file `fail` beside it makes it fail as pkg does on a
/// bad signature.
const STAND_IN_PKG: &str = r#"#!/bin/sh
here=$(dirname "$0")
log="$here/pkg.log"
root="$2"
echo "argv: $*" >> "$log"
echo "conf: $(tr '\n' ' ' < "$4/FreeBSD-base.conf")" >> "$log"
for k in "$root"/usr/share/keys/*/trusted/*; do echo "key: ${k#$root}" >> "$log"; done
[ -d "$root/usr/share/keys/pkgbase-15/revoked" ] || [ -d "$root/usr/share/keys/pkgbase-16/revoked" ] || echo "no revoked dir" >> "$log"
if [ -e "$here/fail" ]; then
  echo "pkg: No trusted public keys found" >&2
  exit 1
fi
case "${11}" in
update)
  mkdir -p "$root/var/db/pkg/repos/FreeBSD-base"
  echo catalogue > "$root/var/db/pkg/repos/FreeBSD-base/db"
  echo "Updating FreeBSD-base repository catalogue..."
  ;;
install)
  mkdir -p "$root/bin" "$root/var/cache/pkg" "$root/var/db/pkg"
  echo "$6" > "$root/bin/freebsd-version"
  echo package > "$root/var/cache/pkg/FreeBSD-runtime.pkg"
  echo db > "$root/var/db/pkg/local.sqlite"
  shift 14
  echo "Installing $*"
  ;;
esac
"#;

#[test]
fn a_pkgbase_base_is_installed_by_pkg_and_follows_the_catalogue() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let www = t.path().join("www");
    let repo15 = www.join("FreeBSD:15:amd64/base_release_0");
    fs::create_dir_all(&repo15).unwrap();
    fs::write(repo15.join("packagesite.pkg"), "catalogue 1").unwrap();
    let server = Server::start(&www);
    let bin = t.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let pkg = bin.join("pkg");
    fs::write(&pkg, STAND_IN_PKG).unwrap();
    fs::set_permissions(&pkg, fs::Permissions::from_mode(0o755)).unwrap();
    let keys = t.path().join("keys");
    fs::create_dir_all(&keys).unwrap();
    let settings = |pkg_line: &str| {
        format!(
            "[freebsd]\nmanifests_dir = \"{}\"\npkgbase_url = \"{}/${{ABI}}/base_release_${{VERSION_MINOR}}\"\npkg_keys_dir = \"{}\"\n{pkg_line}",
            t.path().join("no-manifests").display(),
            server.url,
            keys.display()
        )
    };
    let config = t.path().join("config.toml");
    fs::write(&config, settings(&format!("pkg = \"{}\"\n", pkg.display()))).unwrap();
    let root = t.path().join("root");
    let ctx = context(t.path(), "FROM freebsd:15.0-RELEASE\nSYSRC hostname=web\n");
    let build = |extra: &[&str]| {
        let mut c = build_cmd(&root, &server, &ctx, &config);
        c.args(["-t", "pb:1"]).args(extra);
        c
    };
    let log = || fs::read_to_string(bin.join("pkg.log")).unwrap_or_default();

    let out = ok(&mut build(&["--freebsd-base", "pkgbase"]));
    let first = result(&out);
    assert_eq!(first["steps_run"], 1, "{first}");
    // pkg's output is the FROM step's output.
    assert!(
        out.lines()
            .any(|l| l.contains("Installing FreeBSD-set-minimal-jail")),
        "{out}"
    );
    // Planning asked the repository for its catalogue (its digest is the
    // identity) once, in pkg's order (`repository_files::fetch`: meta.conf,
    // else meta.txz, then the catalogues; this repository serves only
    // packagesite.pkg); nothing of the release mirror was needed.
    assert_eq!(
        server.requests(),
        [
            "GET /FreeBSD:15:amd64/base_release_0/meta.conf",
            "GET /FreeBSD:15:amd64/base_release_0/meta.txz",
            "GET /FreeBSD:15:amd64/base_release_0/data.pkg",
            "GET /FreeBSD:15:amd64/base_release_0/data.tzst",
            "GET /FreeBSD:15:amd64/base_release_0/packagesite.pkg"
        ]
    );
    let logged = log();
    let argv: Vec<&str> = logged
        .lines()
        .filter_map(|l| l.strip_prefix("argv: "))
        .collect();
    assert_eq!(argv.len(), 2, "{logged}");
    let words: Vec<Vec<&str>> = argv.iter().map(|a| a.split(' ').collect()).collect();
    // pkg(8): global options (--rootdir, --repo-conf-dir, -o) before the
    // command, as Bastille's bootstrap and FreeBSD's make-oci-image.sh
    // give them; the catalogue first, then the set.
    for w in &words {
        assert_eq!(w[0], "--rootdir", "{logged}");
        assert_eq!(w[2], "--repo-conf-dir", "{logged}");
        assert_eq!(
            w[4..10],
            [
                "-o",
                "ABI=FreeBSD:15:amd64",
                "-o",
                "IGNORE_OSVERSION=yes",
                "-o",
                "ASSUME_ALWAYS_YES=yes"
            ]
        );
        assert!(Path::new(w[1]).starts_with(&root), "the root is a snapshot");
        assert!(
            !Path::new(w[3]).starts_with(&root),
            "the configuration is not in it"
        );
    }
    assert_eq!(words[0][10..], ["update", "-r", "FreeBSD-base"]);
    assert_eq!(
        words[1][10..],
        [
            "install",
            "-y",
            "-r",
            "FreeBSD-base",
            "FreeBSD-set-minimal-jail"
        ]
    );
    // The repository's signatures are checked against the keys, which
    // were in the root before pkg first ran.
    let conf = logged.lines().find(|l| l.starts_with("conf: ")).unwrap();
    assert!(
        conf.contains(&format!(
            "url: \"{}/FreeBSD:15:amd64/base_release_0\"",
            server.url
        )) && conf.contains("signature_type: \"fingerprints\"")
            && conf.contains("fingerprints: \"/usr/share/keys/pkgbase-15\""),
        "{conf}"
    );
    let seen: Vec<&str> = logged.lines().filter(|l| l.starts_with("key: ")).collect();
    assert_eq!(
        seen,
        [
            "key: /usr/share/keys/pkgbase-15/trusted/awskms-15",
            "key: /usr/share/keys/pkgbase-15/trusted/backup-signing-15"
        ]
        .repeat(2)
    );
    assert!(!logged.contains("no revoked dir"), "{logged}");

    let layers = exported_layers(&root, "pb:1", &t.path().join("oci"));
    let base = &layers[0];
    assert_eq!(
        base["bin/freebsd-version"].content,
        b"ABI=FreeBSD:15:amd64\n"
    );
    assert!(
        String::from_utf8_lossy(&base["usr/share/keys/pkgbase-15/trusted/awskms-15"].content)
            .contains("1d7b45d20fa8d6ed26f9b4a13ac81a6b5df860b9fe644d07b87e92298ba72595")
    );
    assert_eq!(base["var/db/pkg/local.sqlite"].content, b"db\n");
    // The catalogue and the downloaded packages stay out of the layer.
    for gone in [
        "var/cache/pkg/FreeBSD-runtime.pkg",
        "var/db/pkg/repos/FreeBSD-base/db",
    ] {
        assert!(!base.contains_key(gone), "{gone} in the base layer");
    }
    let history = base_history(&root, "pb:1");
    assert!(
        history.contains("pkgbase FreeBSD-set-minimal-jail")
            && history.contains("catalogue content sha256:"),
        "{history}"
    );

    // Again, the catalogue unchanged: pkg does not run, the same image.
    let second = result(&ok(&mut build(&["--freebsd-base", "pkgbase"])));
    assert_eq!(log().lines().filter(|l| l.starts_with("argv")).count(), 2);
    assert_eq!(second["steps_run"], 0);
    assert_eq!(second["manifest"], first["manifest"]);

    // A new catalogue: the base is installed again, and what follows it.
    fs::write(repo15.join("packagesite.pkg"), "catalogue 2").unwrap();
    let third = result(&ok(&mut build(&["--freebsd-base", "pkgbase"])));
    assert_eq!(log().lines().filter(|l| l.starts_with("argv")).count(), 4);
    assert_eq!(third["steps_run"], 1);
    assert_ne!(third["manifest"], first["manifest"]);

    // pkg failing (here: a signature it cannot check) stops the build,
    // naming the command and what pkg said; nothing is committed.
    fs::write(repo15.join("packagesite.pkg"), "catalogue 3").unwrap();
    fs::write(bin.join("fail"), "").unwrap();
    let out = run(&mut build(&["--freebsd-base", "pkgbase"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("update -r FreeBSD-base") && err.contains("No trusted public keys found"),
        "{err}"
    );
    fs::remove_file(bin.join("fail")).unwrap();
    let fourth = result(&ok(&mut build(&["--freebsd-base", "pkgbase"])));
    assert_eq!(fourth["steps_run"], 1);

    // 16.0 is made from pkgbase without being asked, with the host's keys.
    let repo16 = www.join("FreeBSD:16:amd64/base_release_0");
    fs::create_dir_all(&repo16).unwrap();
    fs::write(repo16.join("packagesite.pkg"), "catalogue 16").unwrap();
    fs::create_dir_all(keys.join("pkgbase-16/trusted")).unwrap();
    fs::write(keys.join("pkgbase-16/trusted/k16"), "fingerprint: \"16\"\n").unwrap();
    let ctx16 = t.path().join("ctx16");
    fs::create_dir_all(&ctx16).unwrap();
    fs::write(ctx16.join("Jailfile"), "FROM freebsd:16.0-RELEASE\n").unwrap();
    let mut c = build_cmd(&root, &server, &ctx16, &config);
    ok(c.args(["-t", "pb:16"]));
    let logged = log();
    assert!(logged.contains("ABI=FreeBSD:16:amd64"), "{logged}");
    assert!(
        logged.contains("key: /usr/share/keys/pkgbase-16/trusted/k16"),
        "{logged}"
    );

    // pkg(8) asked for where it cannot run says so, and what to use
    // instead, before anything is fetched (without the setting, jbuild's
    // installer makes the base: build::pkgbase).
    fs::write(&config, settings("\n[pkg]\ninstaller = \"pkg\"\n")).unwrap();
    fs::write(repo15.join("packagesite.pkg"), "catalogue 4").unwrap();
    let before = server.requests().len();
    let out = run(&mut build(&["--freebsd-base", "pkgbase"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("[pkg] installer = \"pkg\" installs pkgbase bases with pkg(8)")
            && err.contains("jbuild's own installer")
            && err.contains("build on FreeBSD"),
        "{err}"
    );
    assert_eq!(server.requests().len(), before, "{:?}", server.requests());
}

/// The `created_by` of the image's first history entry.
fn base_history(root: &Path, tag: &str) -> String {
    let out = ok(jbuild(root).args(["inspect", tag]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v.pointer("/config/history/0/created_by")
        .and_then(|h| h.as_str())
        .unwrap_or_else(|| panic!("no history in {out}"))
        .to_string()
}
