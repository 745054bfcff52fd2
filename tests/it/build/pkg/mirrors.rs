//! `mirror_type: http` through `jbuild build`: the repository's url serves
//! a list of `URL:` lines (pkg-repository(5)); the mirrors are tried in
//! the order listed, the first serving nothing (every file 404), the next
//! one serving the repository, from which the package is fetched too. The
//! same from `--pkg-repos` (the fetch phase reads the list for the step's
//! key). A `pkg+` url with `mirror_type: http` is refused, as pkg refuses
//! it.

use std::fs;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use crate::support::common::{jbuild, run};
use crate::support::limits::{Answer, Server};
use crate::support::pkgrepo::image::{freebsd_tree, packages};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing};

const ABI: &str = "FreeBSD:14:amd64";

#[test]
fn an_http_mirror_list_is_tried_in_order() {
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let www = t.path().join("www");
    let mut spec = RepoSpec::new(Layout::DataPkg, packages());
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.write(&www.join("live").join(ABI).join("latest"));
    let port = Arc::new(AtomicU16::new(0));
    let seen_port = port.clone();
    let server = Server::start(move |r| {
        let path = r.path.replace("%3A", ":");
        if path == format!("/list/{ABI}/latest") {
            let p = seen_port.load(Ordering::SeqCst);
            let body = format!(
                "# the mirrors\nURL: http://127.0.0.1:{p}/empty/{ABI}/latest\n\
                 URL:\thttp://127.0.0.1:{p}/live/{ABI}/latest/\nnot a mirror\n"
            );
            return Answer::Reply {
                status: "200 OK",
                headers: vec![],
                body: body.into_bytes(),
            };
        }
        match fs::read(www.join(path.trim_start_matches('/'))) {
            Ok(body) if path.starts_with("/live/") => Answer::Reply {
                status: "200 OK",
                headers: vec![],
                body,
            },
            _ => Answer::status("404 Not Found"),
        }
    });
    port.store(server.port, Ordering::SeqCst);
    let conf = |url: &str| {
        format!(
            "FreeBSD: {{\n  url: \"{url}\",\n  mirror_type: \"http\",\n  \
             signature_type: \"fingerprints\",\n  fingerprints: \"/usr/share/keys/pkg\",\n  \
             enabled: yes\n}}\n"
        )
    };
    let list = format!("http://127.0.0.1:{}/list/${{ABI}}/latest", server.port);
    // (the image's FreeBSD.conf url, a --pkg-repos file, exit code)
    let literal = list.replace("${ABI}", ABI);
    let cases = [
        (list.clone(), None, 0),
        (list.replace("/list/", "/nothing/"), Some(conf(&literal)), 0),
        (format!("pkg+{list}"), None, 1),
    ];
    for (i, (url, repos, code)) in cases.iter().enumerate() {
        let before = server.requests().len();
        // A root each: the package cache would keep the package.
        let root = t.path().join(format!("root-{i}"));
        let ctx = t.path().join(format!("case-{i}"));
        freebsd_tree(&ctx.join("tree"), "amd64", url, &key);
        fs::write(ctx.join("tree/etc/pkg/FreeBSD.conf"), conf(url)).unwrap();
        fs::write(
            ctx.join("Jailfile"),
            "FROM scratch\nCOPY tree/ /\nPKG --no-bootstrap other\n",
        )
        .unwrap();
        let mut cmd = jbuild(&root);
        cmd.args(["build", "-q", "-t", &format!("mirrors:{i}")])
            .args(["--platform", "freebsd/amd64"]);
        if let Some(text) = repos {
            let dir = t.path().join(format!("repos-{i}"));
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("FreeBSD.conf"), text).unwrap();
            cmd.arg("--pkg-repos").arg(&dir);
        }
        let out = run(cmd.arg(&ctx));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "case {i}: {err}");
        let asked: Vec<String> = server.requests()[before..]
            .iter()
            .map(|r| r.path.replace("%3A", ":"))
            .collect();
        if *code == 1 {
            assert!(
                err.contains("repository `FreeBSD`") && err.contains("mirror_type: http"),
                "case {i}: {err}"
            );
            assert!(asked.is_empty(), "case {i}: {asked:?}");
            continue;
        }
        let at = |p: &str| asked.iter().position(|a| a == p);
        let list_at = at(&format!("/list/{ABI}/latest")).expect("the list is asked");
        let empty_at = at(&format!("/empty/{ABI}/latest/data.pkg")).expect("mirror 1 asked");
        let live_at = at(&format!("/live/{ABI}/latest/data.pkg")).expect("mirror 2 asked");
        assert!(
            list_at < empty_at && empty_at < live_at,
            "case {i}: {asked:?}"
        );
        assert!(
            asked.contains(&format!("/live/{ABI}/latest/All/other-0.5.pkg")),
            "case {i}: {asked:?}"
        );
        assert!(
            !asked.iter().any(|a| a.starts_with("/nothing/")),
            "case {i}: the image's url was asked: {asked:?}"
        );
    }
}
