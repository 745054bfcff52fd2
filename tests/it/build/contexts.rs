//! Build contexts that are no directory here, through the `jbuild` binary
//! (issue 33 item 3): a git repository (`file://…#ref:subdir`) checked out
//! at the commit its ref resolves to, the commit in the provenance and in
//! the keys of the steps that read the context; credentials for an
//! `http(s)://` repository from the keychain and from `--secret`; a tar
//! archive from a URL on 127.0.0.1; a tar archive and a bare recipe on
//! standard input; hostile archives refused as a hostile layer is, and a
//! recipe that is a link out of the context never read.

use crate::support::common::*;
use crate::support::hostile::{gzip, Tar};
use crate::support::limits::{Answer, Server};
use crate::support::origins::{file_server, git, git_repo};

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;

fn write(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `jbuild build -t tag CONTEXT --provenance-file FILE`: the provenance.
fn build_git(root: &Path, tag: &str, context: &str, prov: &Path) -> (Value, String) {
    let out = run(jbuild(root)
        .args(["build", "-t", tag, context, "--provenance-file"])
        .arg(prov));
    let err = stderr(&out);
    assert!(out.status.success(), "build {tag}: {err}");
    (
        serde_json::from_slice(&fs::read(prov).unwrap()).unwrap(),
        err,
    )
}

fn keys(prov: &Value) -> Vec<String> {
    prov["buildConfig"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect()
}

/// The root of `image` as umoci unpacks it.
fn tree(root: &Path, image: &str, work: &Path) -> PathBuf {
    fs::create_dir_all(work).unwrap();
    export_unpacked(root, image, work).1
}

#[test]
fn a_git_context_is_pinned_to_its_commit_in_the_provenance_and_the_keys() {
    let t = tempfile::tempdir().unwrap();
    let (root, repo) = (t.path().join("root"), t.path().join("repo.git"));
    let first = git_repo(
        &repo,
        &[
            (
                "app/Containerfile",
                b"FROM scratch\nCOPY app.txt /srv/app.txt\n",
            ),
            ("app/app.txt", b"v1\n"),
            ("README", b"one\n"),
        ],
    );
    let url = format!("file://{}", repo.display());
    let context = format!("{url}#main:app");
    let prov = t.path().join("prov.json");

    let (p1, err) = build_git(&root, "ctx:1", &context, &prov);
    assert!(
        err.contains(&format!("context: git+{context} at commit {first}")),
        "{err}"
    );
    let material = p1["materials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["uri"] == format!("git+{context}").as_str())
        .unwrap_or_else(|| panic!("no material for the repository: {p1}"));
    assert_eq!(material["digest"]["sha1"], first.as_str());
    let r = tree(&root, "ctx:1", &t.path().join("one"));
    assert_eq!(fs::read_to_string(r.join("srv/app.txt")).unwrap(), "v1\n");

    // The same commit: every step cached, the same keys.
    let (p2, err) = build_git(&root, "ctx:2", &context, &prov);
    assert!(err.contains("0 steps run, 1 cached"), "{err}");
    assert_eq!(keys(&p1), keys(&p2));

    // A commit that changes no file the build copies: the key of the step
    // that reads the context follows the commit all the same.
    write(&repo.join("README"), b"two\n");
    git(&repo, &["commit", "-q", "-am", "two"]);
    let second = git(&repo, &["rev-parse", "HEAD"]);
    let (p3, err) = build_git(&root, "ctx:3", &context, &prov);
    assert!(err.contains("1 steps run, 0 cached"), "{err}");
    assert_ne!(keys(&p1), keys(&p3));
    assert!(p3.to_string().contains(&second), "{p3}");

    // Pinned to the first commit again: cached from the first build.
    let pinned = format!("{url}#{first}:app");
    let (p4, err) = build_git(&root, "ctx:4", &pinned, &prov);
    assert!(err.contains("0 steps run, 1 cached"), "{err}");
    assert_eq!(keys(&p1), keys(&p4));

    // A ref or subdirectory the repository lacks: the user's mistake.
    for (bad, named) in [
        (format!("{url}#nope:app"), "nope"),
        (format!("{url}#main:nowhere"), "nowhere"),
    ] {
        let out = run(jbuild(&root).args(["build", "-t", "ctx:5", &bad]));
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains(named), "{}", stderr(&out));
    }
}

/// A server that answers every request 404 and keeps what it was sent.
fn refusing_server() -> Server {
    Server::start(|_| Answer::status("404 Not Found"))
}

fn authorization(server: &Server) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter_map(|r| r.header("authorization").map(str::to_string))
        .collect()
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    let pair = format!("{user}:{password}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

#[test]
fn a_git_context_over_http_gets_credentials_from_the_keychain_and_secrets() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let server = refusing_server();
    let host = server.host();
    let url = format!("http://{host}/team/app.git#main");
    // The keychain: a containers auth file naming the server.
    let auth = t.path().join("auth.json");
    let pair = basic("builder", "hunter2");
    let inline = pair.strip_prefix("Basic ").unwrap();
    write(
        &auth,
        format!("{{\"auths\": {{\"{host}\": {{\"auth\": \"{inline}\"}}}}}}").as_bytes(),
    );
    let out = run(jbuild(&root)
        .env("REGISTRY_AUTH_FILE", &auth)
        .args(["build", "-t", "cred:1", &url]));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("hunter2"),
        "the password was printed"
    );
    let sent = authorization(&server);
    assert!(
        !sent.is_empty() && sent.iter().all(|h| *h == pair),
        "git was not given the keychain's credential: {sent:?}"
    );

    // `--secret id=GIT_AUTH_TOKEN` wins over the keychain.
    let server = refusing_server();
    let host = server.host();
    let url = format!("http://{host}/team/app.git");
    let token = t.path().join("token");
    write(&token, b"tok-123\n");
    let out = run(jbuild(&root)
        .env("REGISTRY_AUTH_FILE", &auth)
        .args(["build", "-t", "cred:2", &url, "--secret"])
        .arg(format!("id=GIT_AUTH_TOKEN,src={}", token.display())));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let sent = authorization(&server);
    let want = basic("x-access-token", "tok-123");
    assert!(
        !sent.is_empty() && sent.iter().all(|h| *h == want),
        "git was not given the token: {sent:?}"
    );
}

fn context_tar() -> Vec<u8> {
    Tar::new()
        .file(b"Dockerfile", b"FROM scratch\nCOPY files/ /srv/\n")
        .dir(b"files/")
        .file(b"files/hello.txt", b"hello\n")
        .finish()
}

/// `jbuild build ARGS`, `input` on its standard input.
fn build_stdin(root: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = jbuild(root)
        .arg("build")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The build may refuse before reading it all.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

#[test]
fn archives_from_a_url_and_standard_input_are_contexts() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let archive = gzip(&context_tar());
    let server = file_server(&[
        ("/ctx.tar.gz", &archive),
        ("/Containerfile", b"FROM scratch\nLABEL from=url\n"),
    ]);
    let url = format!("http://{}/ctx.tar.gz", server.host());
    let out = run(jbuild(&root).args(["build", "-t", "url:1", &url]));
    assert!(out.status.success(), "{}", stderr(&out));
    let r = tree(&root, "url:1", &t.path().join("url"));
    assert_eq!(
        fs::read_to_string(r.join("srv/hello.txt")).unwrap(),
        "hello\n"
    );

    // The same archive, plain, on standard input: the same image.
    let out = build_stdin(&root, &["-t", "stdin:1", "-"], &context_tar());
    assert!(out.status.success(), "{}", stderr(&out));
    let ids = ok(jbuild(&root).args(["images", "--format", "{{.ID}}"]));
    let mut ids: Vec<&str> = ids.lines().collect();
    ids.dedup();
    assert_eq!(ids.len(), 1, "two images from one context: {ids:?}");

    // A recipe, not an archive: built with an empty context, from
    // standard input and from a URL.
    let recipe = b"FROM scratch\nLABEL from=stdin\n";
    let out = build_stdin(&root, &["-t", "bare:1", "-"], recipe);
    assert!(out.status.success(), "{}", stderr(&out));
    let bare = format!("http://{}/Containerfile", server.host());
    let out = run(jbuild(&root).args(["build", "-t", "bare:2", &bare]));
    assert!(out.status.success(), "{}", stderr(&out));

    // `-` and `-f -` cannot both read standard input.
    let out = build_stdin(&root, &["-t", "x:1", "-f", "-", "-"], recipe);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("both read standard input"));
}

#[test]
fn hostile_archive_contexts_are_refused_and_a_recipe_link_out_is_not_read() {
    let t = tempfile::tempdir().unwrap();
    let canary = t.path().join("canary");
    fs::create_dir(&canary).unwrap();
    let mut up = b"../".repeat(12);
    up.extend_from_slice(&canary.join("escaped").into_os_string().into_encoded_bytes()[1..]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "dotdot",
            Tar::new()
                .file(b"Dockerfile", b"FROM scratch\n")
                .file(&up, b"x")
                .finish(),
        ),
        (
            "through-symlink",
            Tar::new()
                .symlink(b"out", canary.as_os_str().as_encoded_bytes())
                .file(b"out/through", b"x")
                .finish(),
        ),
        ("device", Tar::new().device(b"null", b'3', 1, 3).finish()),
    ];
    for (name, tar) in cases {
        let root = t.path().join(format!("root-{name}"));
        let out = build_stdin(&root, &["-t", "evil:1", "-"], &gzip(&tar));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(
                "cannot extract the tar.gz archive of the build context on standard input"
            ),
            "{name}: {err}"
        );
        let listed: Vec<_> = fs::read_dir(&canary).unwrap().collect();
        assert!(listed.is_empty(), "{name}: wrote outside: {listed:?}");
        assert!(ok(jbuild(&root).args(["images", "-q"])).is_empty());
    }

    // A Dockerfile that links to a recipe outside the archive: never
    // read, so there is no recipe at all.
    let outside = t.path().join("outside-recipe");
    write(&outside, b"FROM scratch\nLABEL leaked=yes\n");
    let tar = Tar::new()
        .symlink(b"Dockerfile", outside.as_os_str().as_encoded_bytes())
        .finish();
    let root = t.path().join("root-link");
    let out = build_stdin(&root, &["-t", "link:1", "-"], &tar);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no recipe in the context -"), "{err}");
}
