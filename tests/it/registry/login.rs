//! `jbuild login` / `jbuild logout` against a real Distribution registry
//! with htpasswd and bearer-token auth: credentials are checked before
//! they are kept, kept where docker keeps them, and never printed.

use crate::support::registry as registry_support;

use std::fs;
use std::path::Path;

use base64::Engine;
use registry_support::token::{TokenServer, ISSUER};
use registry_support::{htpasswd, jbuild, run_with_input, Options, Registry, LIMIT};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn docker_config(home: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(home.join("docker/config.json")).unwrap()).unwrap()
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn login_checks_htpasswd_credentials_before_keeping_them() {
    let home = tempfile::tempdir().unwrap();
    let hp = htpasswd(home.path(), &[("alice", "wonder-land")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });

    let bad = run_with_input(
        jbuild(home.path()).args(["login", &reg.host(), "-u", "alice", "--password-stdin"]),
        b"not-the-password\n",
        LIMIT,
    );
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad.stderr));
    let err = text(&bad.stderr);
    assert!(
        err.contains(&format!(
            "{} rejected the credentials for user `alice`",
            reg.host()
        )),
        "{err}"
    );
    assert!(!err.contains("not-the-password") && !text(&bad.stdout).contains("not-the-password"));
    assert!(
        !home.path().join("docker/config.json").exists(),
        "kept credentials that failed"
    );

    let good = run_with_input(
        jbuild(home.path()).args(["login", &reg.host(), "-u", "alice", "--password-stdin"]),
        b"wonder-land\n",
        LIMIT,
    );
    assert!(good.status.success(), "{}", text(&good.stderr));
    assert!(text(&good.stdout).contains("Login succeeded"));
    for out in [text(&good.stdout), text(&good.stderr)] {
        assert!(!out.contains("wonder-land"), "{out}");
    }
    let cfg = docker_config(home.path());
    assert_eq!(cfg["auths"][reg.host()]["auth"], b64("alice:wonder-land"));
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(home.path().join("docker/config.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let out = run_with_input(
        jbuild(home.path()).args(["logout", &reg.host()]),
        b"",
        LIMIT,
    );
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("Removed the credentials"));
    assert!(docker_config(home.path())["auths"]
        .get(reg.host())
        .is_none());
    let out = run_with_input(
        jbuild(home.path()).args(["logout", &reg.host()]),
        b"",
        LIMIT,
    );
    assert!(
        text(&out.stdout).contains("Not logged in"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn login_with_dash_p_warns_about_shell_history() {
    let home = tempfile::tempdir().unwrap();
    let hp = htpasswd(home.path(), &[("bob", "pw-123")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    let out = run_with_input(
        jbuild(home.path()).args(["login", &reg.host(), "-u", "bob", "-p", "pw-123"]),
        b"",
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("shell history"),
        "{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stderr).contains("pw-123"));
}

#[test]
fn login_follows_the_bearer_token_flow() {
    let home = tempfile::tempdir().unwrap();
    let tokens = TokenServer::start(home.path(), "carol", "t0ken-pass");
    let reg = Registry::start_with(&Options {
        token: Some((tokens.realm(), ISSUER.into(), tokens.bundle.clone())),
        ..Options::default()
    });
    let bad = run_with_input(
        jbuild(home.path()).args(["login", &reg.host(), "-u", "carol", "--password-stdin"]),
        b"wrong",
        LIMIT,
    );
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("rejected the credentials"),
        "{}",
        text(&bad.stderr)
    );

    let good = run_with_input(
        jbuild(home.path()).args(["login", &reg.host(), "-u", "carol", "--password-stdin"]),
        b"t0ken-pass",
        LIMIT,
    );
    assert!(good.status.success(), "{}", text(&good.stderr));
    let asked = tokens.requests.lock().unwrap().clone();
    assert!(
        asked
            .iter()
            .any(|r| r.contains("account=carol") && r.contains("service=jbuild-registry")),
        "{asked:?}"
    );
    assert_eq!(
        docker_config(home.path())["auths"][reg.host()]["auth"],
        b64("carol:t0ken-pass")
    );
}

#[test]
fn login_refuses_bad_arguments_clearly() {
    let home = tempfile::tempdir().unwrap();
    let out = run_with_input(
        jbuild(home.path()).args(["login", "127.0.0.1:1", "-u", "x"]),
        b"",
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("--password-stdin"),
        "{}",
        text(&out.stderr)
    );

    let out = run_with_input(
        jbuild(home.path()).args(["login", "bad host!", "-u", "x", "-p", "y"]),
        b"",
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("is not a registry name"),
        "{}",
        text(&out.stderr)
    );

    // Nothing listens there: a clear error naming the address, exit 1.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run_with_input(
        jbuild(home.path()).args([
            "login",
            &format!("127.0.0.1:{port}"),
            "-u",
            "x",
            "--password-stdin",
        ]),
        b"y",
        LIMIT,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("cannot reach http://127.0.0.1:{port}/v2/")),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn login_stores_through_a_credential_helper() {
    let home = tempfile::tempdir().unwrap();
    let hp = htpasswd(home.path(), &[("dave", "helper-secret")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    // A helper that keeps what it is given in a file, as `pass` would in a keyring.
    let bin = home.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let kept = home.path().join("kept.json");
    let helper = bin.join("docker-credential-testing");
    fs::write(
        &helper,
        format!(
            "#!/bin/sh\ncase $1 in store) cat > '{}' ;; *) exit 1 ;; esac\n",
            kept.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&helper, fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir_all(home.path().join("docker")).unwrap();
    fs::write(
        home.path().join("docker/config.json"),
        r#"{"credsStore": "testing"}"#,
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out = run_with_input(
        jbuild(home.path()).env("PATH", path).args([
            "login",
            &reg.host(),
            "-u",
            "dave",
            "--password-stdin",
        ]),
        b"helper-secret",
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let given: serde_json::Value = serde_json::from_slice(&fs::read(&kept).unwrap()).unwrap();
    assert_eq!(given["Username"], "dave");
    assert_eq!(given["Secret"], "helper-secret");
    assert_eq!(given["ServerURL"], reg.host());
    let cfg = fs::read_to_string(home.path().join("docker/config.json")).unwrap();
    assert!(
        !cfg.contains(&b64("dave:helper-secret")) && !cfg.contains("helper-secret"),
        "{cfg}"
    );
}

#[test]
fn login_to_a_registry_without_auth_succeeds_as_with_docker() {
    let home = tempfile::tempdir().unwrap();
    let reg = Registry::start();
    let out = run_with_input(
        jbuild(home.path()).args([
            "--json",
            "login",
            &reg.host(),
            "-u",
            "u",
            "--password-stdin",
        ]),
        b"p",
        LIMIT,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["registry"], reg.host());
    assert_eq!(v["logged_in"], true);
}
