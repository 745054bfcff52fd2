//! Signing in at registries, and what a user sees when a registry cannot
//! be used, through the binary against a real Distribution registry:
//!
//! - one reading of the challenges for login, push and pull: a registry
//!   that sends two `WWW-Authenticate` headers (Basic and Bearer, in
//!   either order) gets Bearer from all three, as from docker;
//! - a registry that cannot be reached (a refused port, a name that does
//!   not resolve), TLS that fails (a CA jbuild does not know, a
//!   certificate for another name) and refused credentials (401 after
//!   sending them, 403) exit 1, saying what was tried and what to do.

use crate::support::registry as registry_support;

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::process::Output;

use registry_support::proxy::{Fault, FaultKind, Proxy};
use registry_support::tls::TestCa;
use registry_support::token::{TokenServer, ISSUER};
use registry_support::{
    docker_login, htpasswd, run_bounded, run_ok, run_with_input, Options, Registry, World, LIMIT,
};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exits 1, and stderr holds every one of `wanted`.
fn fails_as_users(out: &Output, wanted: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    for w in wanted {
        assert!(err.contains(w), "wanted `{w}` in:\n{err}");
    }
}

fn login(w: &World, host: &str, user: &str, password: &str) -> Output {
    run_with_input(
        w.jbuild()
            .args(["login", host, "-u", user, "--password-stdin"]),
        password.as_bytes(),
        LIMIT,
    )
}

/// A port on 127.0.0.1 where nothing listens.
fn refused_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Login, push and pull through a proxy that adds `Basic realm=…` to
/// every 401 of a registry with token auth (before its Bearer challenge
/// or after it): each chooses Bearer, and none sends Basic credentials to
/// the registry.
fn all_choose_bearer(basic_first: bool) {
    let w = World::new(64 << 10);
    let tokens = TokenServer::start(w.tmp.path(), "carol", "t0ken-pass");
    let reg = Registry::start_with(&Options {
        token: Some((tokens.realm(), ISSUER.into(), tokens.bundle.clone())),
        ..Options::default()
    });
    let extra = FaultKind::ExtraChallenge(r#"Basic realm="jbuild-test""#.into(), basic_first);
    let proxy = Proxy::start(reg.port, vec![Fault::new("GET", "/v2/", 1 << 20, extra)]);
    let host = format!("127.0.0.1:{}", proxy.port);
    let name = format!("{host}/jbuild/app:1");

    // Each command: the scheme of every request it sent to the registry.
    let schemes = |what: &str| {
        let seen = proxy.authorizations();
        proxy.clear_log();
        assert!(
            seen.iter().any(|r| r.ends_with(" Bearer")),
            "{what} sent no token: {seen:?}"
        );
        assert!(
            !seen.iter().any(|r| r.ends_with(" Basic")),
            "{what} sent Basic credentials: {seen:?}"
        );
    };
    let out = login(&w, &host, "carol", "t0ken-pass");
    assert!(out.status.success(), "{}", text(&out.stderr));
    schemes("login");
    run_ok(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    schemes("push");
    let other = World::new(0);
    let out = login(&other, &host, "carol", "t0ken-pass");
    assert!(out.status.success(), "{}", text(&out.stderr));
    proxy.clear_log();
    run_ok(other.jbuild().args(["pull", &name]), LIMIT);
    schemes("pull");
    assert!(proxy.applied() >= 3, "the extra challenge was never sent");

    let asked = tokens.requests.lock().unwrap().clone();
    for wanted in [
        "scope=repository%3Ajbuild%2Fapp%3Apull%2Cpush",
        "scope=repository%3Ajbuild%2Fapp%3Apull&",
    ] {
        assert!(
            asked
                .iter()
                .any(|r| r.contains(wanted) && r.contains("account=carol")),
            "no token asked with {wanted}: {asked:?}"
        );
    }
    assert!(
        asked
            .iter()
            .any(|r| !r.contains("scope=") && r.contains("account=carol")),
        "login asked for no identity token: {asked:?}"
    );
}

#[test]
fn login_push_and_pull_choose_bearer_when_basic_comes_first() {
    all_choose_bearer(true);
}

#[test]
fn login_push_and_pull_choose_bearer_when_basic_comes_second() {
    all_choose_bearer(false);
}

#[test]
fn a_refused_connection_is_the_users_to_fix() {
    let w = World::new(0);
    let port = refused_port();
    let host = format!("127.0.0.1:{port}");
    let url = format!("cannot reach http://{host}/v2/");
    let pull = run_bounded(w.jbuild().args(["pull", &format!("{host}/a/b:1")]), LIMIT);
    fails_as_users(
        &pull,
        &[&url, "without credentials", "check the registry's address"],
    );

    let out = login(&w, &host, "alice", "pw");
    fails_as_users(&out, &[&url, "with the credentials of `alice`"]);

    docker_login(w.tmp.path(), &host, "alice", "pw");
    let push = run_bounded(
        w.jbuild().args(["push", "app:1", &format!("{host}/a/b:1")]),
        LIMIT,
    );
    fails_as_users(&push, &[&url, "with the credentials of `alice`"]);

    // A build's FROM is a pull like any other.
    let ctx = w.path("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("Jailfile"), format!("FROM {host}/a/b:1\n")).unwrap();
    let build = run_bounded(w.jbuild().args(["build", "-t", "x:1"]).arg(&ctx), LIMIT);
    fails_as_users(&build, &[&url]);
}

#[test]
fn a_name_that_does_not_resolve_is_the_users_to_fix() {
    let w = World::new(0);
    let host = "registry.jbuild-test.invalid";
    let pull = run_bounded(w.jbuild().args(["pull", &format!("{host}/a/b:1")]), LIMIT);
    fails_as_users(
        &pull,
        &[
            &format!("cannot reach https://{host}/v2/"),
            "check the registry's address",
        ],
    );
    let out = login(&w, host, "alice", "pw");
    fails_as_users(&out, &[&format!("cannot reach https://{host}/v2/")]);
}

/// Forwards every connection to 127.0.0.2:PORT on to 127.0.0.1:`to`: the
/// same registry under a name its certificate does not name.
fn forward_from_127_0_0_2(to: u16) -> u16 {
    let l = TcpListener::bind("127.0.0.2:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in l.incoming().flatten() {
            let Ok(up) = TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            let (mut c2, mut u2) = (client.try_clone().unwrap(), up.try_clone().unwrap());
            let (mut c, mut u) = (client, up);
            std::thread::spawn(move || std::io::copy(&mut c, &mut u2));
            std::thread::spawn(move || std::io::copy(&mut u, &mut c2));
        }
    });
    port
}

#[test]
fn tls_failures_are_the_users_to_fix_and_say_what_to_do() {
    let w = World::new(0);
    let ca = TestCa::new(&w.path("tls"));
    let reg = Registry::start_with(&Options {
        tls: Some((ca.server_cert.clone(), ca.server_key.clone())),
        ..Options::default()
    });
    let advice = ["--cert-dir", "--tls-verify=false", "[registries]"];
    // A CA jbuild does not know.
    let tried = format!("TLS with https://{}/v2/ failed", reg.host());
    let pull = run_bounded(
        w.jbuild().args(["pull", &format!("{}/a/b:1", reg.host())]),
        LIMIT,
    );
    fails_as_users(&pull, &[&[tried.as_str()][..], &advice[..]].concat());
    let out = login(&w, &reg.host(), "alice", "pw");
    fails_as_users(&out, &[&[tried.as_str()][..], &advice[..]].concat());

    // The CA known, but the certificate names 127.0.0.1, not 127.0.0.2.
    let other = format!("127.0.0.2:{}", forward_from_127_0_0_2(reg.port));
    let certs = w.path("certs.d");
    fs::create_dir_all(certs.join(&other)).unwrap();
    fs::copy(&ca.ca_cert, certs.join(&other).join("ca.crt")).unwrap();
    fs::write(
        w.path("jbuild.toml"),
        format!("[registries]\ncerts_dir = \"{}\"\n", certs.display()),
    )
    .unwrap();
    let pull = run_bounded(w.jbuild().args(["pull", &format!("{other}/a/b:1")]), LIMIT);
    fails_as_users(
        &pull,
        &[
            &format!("TLS with https://{other}/v2/ failed"),
            "--cert-dir",
        ],
    );
    assert!(
        text(&pull.stderr).contains("is not made for `127.0.0.2:"),
        "{}",
        text(&pull.stderr)
    );
}

#[test]
fn refused_credentials_are_the_users_to_fix() {
    let w = World::new(0);
    let hp = htpasswd(w.tmp.path(), &[("alice", "wonder-land")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    let name = format!("{}/a/b:1", reg.host());
    let rejected = "rejected the credentials for user `alice` (401)";
    docker_login(w.tmp.path(), &reg.host(), "alice", "not-it");
    let pull = run_bounded(w.jbuild().args(["pull", &name]), LIMIT);
    fails_as_users(&pull, &[rejected, "jbuild login"]);
    let push = run_bounded(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    fails_as_users(&push, &[rejected]);
    let out = login(&w, &reg.host(), "alice", "not-it");
    fails_as_users(&out, &[rejected]);

    // Without credentials: the 401 says to sign in.
    fs::remove_file(w.tmp.path().join("docker/config.json")).unwrap();
    let pull = run_bounded(w.jbuild().args(["pull", &name]), LIMIT);
    fails_as_users(&pull, &["no credentials were sent", "jbuild login"]);

    // A 403, with the right credentials.
    let proxy = Proxy::start(
        reg.port,
        vec![
            Fault::new("HEAD", "/manifests/", 99, FaultKind::Status(403, vec![])),
            Fault::new("GET", "/manifests/", 99, FaultKind::Status(403, vec![])),
        ],
    );
    let host = format!("127.0.0.1:{}", proxy.port);
    docker_login(w.tmp.path(), &host, "alice", "wonder-land");
    let pull = run_bounded(w.jbuild().args(["pull", &format!("{host}/a/b:1")]), LIMIT);
    fails_as_users(&pull, &["rejected the credentials for user `alice` (403)"]);
}
