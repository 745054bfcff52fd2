//! Where a PKG step's repository files come from, through the `jbuild`
//! binary, counted at the 127.0.0.1 repository server: the catalogue the
//! fetch phase fetched for the step's key is the one the step reads (one
//! request each for `meta.conf` and the catalogue, one build or two
//! platforms); and a `pkg+http://` repository with `mirror_type: srv` is
//! fetched from the targets the tests' DNS server names for
//! `_http._tcp.HOST` (`[pkg] nameservers`), the first one down, the next
//! one used, HOST itself never resolvable.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use super::pkg::serve;
use crate::support::common::{jbuild, ok, run};
use crate::support::dns::{DnsServer, Quirks};
use crate::support::limits::Server;
use crate::support::pkgrepo::image::freebsd_tree;
use crate::support::pkgrepo::platform::write_repo_for;
use crate::support::pkgrepo::Key;

const AMD64: &str = "FreeBSD:14:amd64";

/// How many requests `server` saw for `path`.
fn asked(server: &Server, path: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.path.replace("%3A", ":") == path)
        .count()
}

/// The amd64 repository under `www`, and a base image `base:1` (for
/// `platforms`) whose own configuration names `url`.
fn base(t: &Path, root: &Path, url: &str, platforms: &[&str]) -> Server {
    let key = Key::new(t, "repo");
    let www = t.join("www");
    // Packages for any FreeBSD 14 (`FreeBSD:14:*`): the one repository
    // serves both platforms' builds, as its packages say.
    write_repo_for(&www.join(AMD64).join("latest"), &key, "FreeBSD:14:*");
    let server = serve(www);
    let url = url.replace("PORT", &server.port.to_string());
    let ctx = t.join("base");
    for arch in ["amd64", "arm64"] {
        freebsd_tree(&ctx.join(format!("tree-{arch}")), arch, &url, &key);
        if url.starts_with("pkg+") {
            fs::write(
                ctx.join(format!("tree-{arch}/etc/pkg/FreeBSD.conf")),
                format!(
                    "FreeBSD: {{\n  url: \"{url}\",\n  mirror_type: \"srv\",\n  \
                     signature_type: \"fingerprints\",\n  fingerprints: \"/usr/share/keys/pkg\",\n  \
                     enabled: yes\n}}\n"
                ),
            )
            .unwrap();
        }
    }
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nARG TARGETARCH\nCOPY tree-${TARGETARCH}/ /\n",
    )
    .unwrap();
    let mut c = jbuild(root);
    c.args(["build", "-q"]);
    if platforms.len() > 1 {
        c.args(["--manifest", "base:1"]);
    } else {
        c.args(["-t", "base:1"]);
    }
    for p in platforms {
        c.args(["--platform", p]);
    }
    ok(c.arg(&ctx));
    server
}

fn app(t: &Path, jailfile: &str) -> PathBuf {
    let app = t.join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(app.join("Jailfile"), jailfile).unwrap();
    app
}

fn succeeded(c: &mut std::process::Command) -> String {
    let out = run(c);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn the_catalogue_fetched_for_the_key_is_the_one_the_step_reads() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let server = base(
        t.path(),
        &root,
        "http://127.0.0.1:PORT/${ABI}/latest",
        &["freebsd/amd64"],
    );
    // The override names the repository without `${ABI}`, so the fetch
    // phase asks it for the key (a base image's ABI is not known then).
    let repos = t.path().join("repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(
        repos.join("FreeBSD.conf"),
        format!(
            "FreeBSD: {{ url: \"http://127.0.0.1:{}/{AMD64}/latest\" }}\n",
            server.port
        ),
    )
    .unwrap();
    let meta = format!("/{AMD64}/latest/meta.conf");
    let data = format!("/{AMD64}/latest/data.pkg");
    let before = (asked(&server, &meta), asked(&server, &data));

    let app = app(t.path(), "FROM base:1\nPKG --no-bootstrap app\n");
    succeeded(
        jbuild(&root)
            .args(["build", "-q", "-t", "app:1", "--pkg-repos"])
            .arg(&repos)
            .arg(&app),
    );
    assert_eq!(
        (
            asked(&server, &meta) - before.0,
            asked(&server, &data) - before.1
        ),
        (1, 1),
        "{:?}",
        server.requests()
    );

    // Two platforms, one repository: once across both checks and steps.
    let two = t.path().join("two");
    let server2 = base(
        t.path(),
        &two,
        "http://127.0.0.1:PORT/${ABI}/latest",
        &["freebsd/amd64", "freebsd/arm64"],
    );
    fs::write(
        repos.join("FreeBSD.conf"),
        format!(
            "FreeBSD: {{ url: \"http://127.0.0.1:{}/{AMD64}/latest\" }}\n",
            server2.port
        ),
    )
    .unwrap();
    succeeded(
        jbuild(&two)
            .args(["build", "-q", "--manifest", "app:list"])
            .args(["--platform", "freebsd/amd64,freebsd/arm64", "--pkg-repos"])
            .arg(&repos)
            .arg(&app),
    );
    assert_eq!(
        (asked(&server2, &meta), asked(&server2, &data)),
        (1, 1),
        "{:?}",
        server2.requests()
    );
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn a_pkg_https_repository_is_fetched_from_its_srv_targets_in_order() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    // HOST is not resolvable: only the SRV targets reach the repository.
    let server = base(
        t.path(),
        &root,
        "pkg+http://pkg.jbuild.invalid/${ABI}/latest",
        &["freebsd/amd64"],
    );
    let down = dead_port();
    let zone: BTreeMap<String, Vec<_>> = [(
        "_http._tcp.pkg.jbuild.invalid".to_string(),
        vec![
            (20, 0, server.port, "127.0.0.1"),
            (10, 0, down, "127.0.0.1"),
        ],
    )]
    .into();
    let dns = DnsServer::start("127.0.0.1:0".parse().unwrap(), zone, Quirks::default());
    let config = t.path().join("jbuild.toml");
    fs::write(
        &config,
        format!("[pkg]\nnameservers = [\"{}\"]\n", dns.addr),
    )
    .unwrap();
    let app = app(t.path(), "FROM base:1\nPKG app\n");
    let text = succeeded(
        jbuild(&root)
            .env("JBUILD_CONFIG", &config)
            .args(["build", "-t", "app:1"])
            .arg(&app),
    );
    assert!(
        text.contains(&format!("http://127.0.0.1:{}/{AMD64}/latest", server.port)),
        "{text}"
    );
    assert_eq!(asked(&server, &format!("/{AMD64}/latest/data.pkg")), 1);
    assert!(
        asked(&server, &format!("/{AMD64}/latest/All/app-2.1_3,1.pkg")) == 1,
        "{:?}",
        server.requests()
    );
}
