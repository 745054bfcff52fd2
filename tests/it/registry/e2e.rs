//! `jbuild push` / `pull` against a real Distribution registry: digests
//! kept end to end, no re-upload, credentials from docker's config.json
//! (htpasswd and bearer tokens), TLS with a CA made here, and skopeo as the
//! peer both ways.

use crate::support::registry as registry_support;

use std::fs;
use std::process::Output;

use registry_support::image::{digests_in_layout, make, verify_layout};
use registry_support::tls::TestCa;
use registry_support::token::{TokenServer, ISSUER};
use registry_support::{
    docker_login, htpasswd, run_bounded, run_ok, run_with_input, Options, Registry, World, LIMIT,
};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn fails_with(out: &Output, code: i32, wanted: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr:\n{err}");
    assert!(err.contains(wanted), "wanted `{wanted}` in:\n{err}");
}

/// Every blob of a jbuild store re-hashes to its name; returns the count.
fn store_is_sound(w: &World) -> usize {
    verify_layout(w.store.path())
}

#[test]
fn htpasswd_credentials_come_from_docker_config_and_wrong_ones_fail_clearly() {
    let w = World::new(64 << 10);
    let hp = htpasswd(w.tmp.path(), &[("alice", "wonder-land")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    let name = format!("{}/jbuild/app:1", reg.host());

    let anon = run_bounded(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    fails_with(&anon, 1, &reg.host());

    docker_login(w.tmp.path(), &reg.host(), "alice", "not-her-password");
    let wrong = run_bounded(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    fails_with(&wrong, 1, &format!("jbuild login {}", reg.host()));
    // Rejected credentials are named as such, not taken for no sign-in.
    fails_with(
        &wrong,
        1,
        &format!("{} rejected the credentials for user `alice`", reg.host()),
    );
    assert!(!text(&anon.stderr).contains("credentials kept"));
    assert!(!text(&wrong.stderr).contains("not-her-password"));

    docker_login(w.tmp.path(), &reg.host(), "alice", "wonder-land");
    let out = run_ok(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    assert_eq!(out.trim(), w.manifest);

    // Pulling needs the credentials too; with them every digest arrives.
    let other = World::new(0);
    let denied = run_bounded(other.jbuild().args(["pull", &name]), LIMIT);
    fails_with(&denied, 1, &reg.host());
    docker_login(other.tmp.path(), &reg.host(), "alice", "wonder-land");
    run_ok(other.jbuild().args(["pull", &name]), LIMIT);
    assert_eq!(
        digests_in_layout(other.store.path(), &w.manifest),
        w.digests
    );
}

#[test]
fn login_then_push_uses_the_kept_credentials() {
    let w = World::new(16 << 10);
    let hp = htpasswd(w.tmp.path(), &[("erin", "s3cret-pw")]);
    let reg = Registry::start_with(&Options {
        htpasswd: Some(hp),
        ..Options::default()
    });
    let login = run_with_input(
        w.jbuild()
            .args(["login", &reg.host(), "-u", "erin", "--password-stdin"]),
        b"s3cret-pw\n",
        LIMIT,
    );
    assert!(login.status.success(), "{}", text(&login.stderr));
    let name = format!("{}/jbuild/app:1", reg.host());
    run_ok(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    run_ok(w.jbuild().args(["logout", &reg.host()]), LIMIT);
    let after = run_bounded(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    fails_with(&after, 1, &reg.host());
}

#[test]
fn bearer_tokens_from_a_token_service() {
    let w = World::new(64 << 10);
    let tokens = TokenServer::start(w.tmp.path(), "bob", "builder");
    let reg = Registry::start_with(&Options {
        token: Some((tokens.realm(), ISSUER.into(), tokens.bundle.clone())),
        ..Options::default()
    });
    let name = format!("{}/jbuild/app:1", reg.host());
    docker_login(w.tmp.path(), &reg.host(), "bob", "wrong");
    let wrong = run_bounded(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    fails_with(&wrong, 1, &reg.host());

    docker_login(w.tmp.path(), &reg.host(), "bob", "builder");
    let out = run_ok(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    assert_eq!(out.trim(), w.manifest);
    let asked = tokens.requests.lock().unwrap().clone();
    assert!(
        asked.iter().any(|r| r.contains("push")),
        "a push token was asked for: {asked:?}"
    );

    let other = World::new(0);
    docker_login(other.tmp.path(), &reg.host(), "bob", "builder");
    run_ok(other.jbuild().args(["pull", &name]), LIMIT);
    assert_eq!(
        digests_in_layout(other.store.path(), &w.manifest),
        w.digests
    );
}

#[test]
fn tls_with_a_ca_from_certs_d_and_a_clear_refusal_without_it() {
    let w = World::new(64 << 10);
    let ca = TestCa::new(&w.path("tls"));
    let reg = Registry::start_with(&Options {
        tls: Some((ca.server_cert.clone(), ca.server_key.clone())),
        ..Options::default()
    });
    let name = format!("{}/jbuild/app:1", reg.host());
    let certs = w.path("certs.d");
    fs::create_dir_all(certs.join(reg.host())).unwrap();
    fs::write(
        w.path("jbuild.toml"),
        format!("[registries]\ncerts_dir = \"{}\"\n", certs.display()),
    )
    .unwrap();

    // The error itself (not a log line) says what is wrong and what to do.
    let error_line = |out: &Output| -> String {
        let err = text(&out.stderr);
        err.lines()
            .skip_while(|l| !l.starts_with("error:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let refused = run_bounded(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    let err = error_line(&refused);
    assert!(
        err.contains("certificate") && err.contains(&format!("{}/ca.crt", reg.host())),
        "{err}"
    );
    let refused = run_with_input(
        w.jbuild()
            .args(["login", &reg.host(), "-u", "any", "--password-stdin"]),
        b"thing",
        LIMIT,
    );
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    let err = error_line(&refused);
    assert!(
        err.contains("certificate") && err.contains("ca.crt"),
        "{err}"
    );

    fs::copy(&ca.ca_cert, certs.join(reg.host()).join("ca.crt")).unwrap();
    let out = run_ok(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    assert_eq!(out.trim(), w.manifest);
    // It really went over TLS: the registry speaks nothing else.
    assert!(!reg.log().contains("HTTP/1.1\" 400"), "{}", reg.log());

    let login = run_with_input(
        w.jbuild()
            .args(["login", &reg.host(), "-u", "any", "--password-stdin"]),
        b"thing",
        LIMIT,
    );
    assert!(login.status.success(), "{}", text(&login.stderr));
}

#[test]
fn skopeo_reads_what_jbuild_pushed_with_identical_digests() {
    let w = World::new(1 << 20);
    let reg = Registry::start();
    let name = format!("{}/jbuild/app:1", reg.host());
    run_ok(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    let out = w.path("by-skopeo");
    run_ok(
        w.skopeo()
            .args(["copy", "--src-tls-verify=false"])
            .arg(format!("docker://{name}"))
            .arg(format!("oci:{}:t", out.display())),
        LIMIT,
    );
    assert_eq!(digests_in_layout(&out, &w.manifest), w.digests);
    assert_eq!(verify_layout(&out), w.digests.len());
}

#[test]
fn jbuild_pulls_what_skopeo_pushed() {
    // The image is made in a store that jbuild never pushes from.
    let src = tempfile::tempdir().unwrap();
    let store = jbuild::store::Store::open(&src.path().join("store")).unwrap();
    let (desc, digests) = make(&store, "peer:1", "from-skopeo", 512 << 10);
    let reg = Registry::start();
    let name = format!("{}/peer/img:2", reg.host());
    let w = World::new(0);
    run_ok(
        w.skopeo()
            .args(["copy", "--dest-tls-verify=false"])
            .arg(format!("oci:{}:peer:1", src.path().join("store").display()))
            .arg(format!("docker://{name}")),
        LIMIT,
    );
    let out = run_ok(w.jbuild().args(["pull", &name]), LIMIT);
    assert_eq!(out.trim(), desc.digest().to_string());
    assert_eq!(
        digests_in_layout(w.store.path(), desc.digest().as_ref()),
        digests
    );
    store_is_sound(&w);
    let images = run_ok(w.jbuild().arg("images"), LIMIT);
    assert!(
        images.contains(&format!("{}/peer/img", reg.host())),
        "{images}"
    );
}

/// A layer the store already holds, damaged since (a disk error), and its
/// snapshot gone: pulling the image again cannot unpack it, and says that
/// the store's copy is at fault and how to mend it, not that the image is
/// bad. After `jbuild check --repair` the same pull works.
#[test]
fn a_pull_that_meets_a_damaged_stored_layer_says_so() {
    let src = World::new(1 << 20);
    let reg = Registry::start();
    let name = format!("{}/jbuild/app:1", reg.host());
    run_ok(src.jbuild().args(["push", "app:1", &name]), LIMIT);
    let dst = World::new(0);
    run_ok(dst.jbuild().args(["pull", &name]), LIMIT);
    run_ok(dst.jbuild().args(["prune", "--cache"]), LIMIT);
    // The biggest blob is the 1 MiB layer.
    let blobs = dst.store.path().join("blobs/sha256");
    let layer = fs::read_dir(&blobs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = fs::read(&layer).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(&layer, &bytes).unwrap();

    let out = run_bounded(dst.jbuild().args(["pull", &name]), LIMIT);
    let hex = layer.file_name().unwrap().to_string_lossy().into_owned();
    fails_with(
        &out,
        2,
        &format!("the store's copy of layer sha256:{hex}, kept from before this pull, is damaged"),
    );
    fails_with(&out, 2, "run `jbuild check --repair`");

    run_bounded(dst.jbuild().args(["check", "--repair"]), LIMIT);
    assert!(!layer.exists());
    let out = run_ok(dst.jbuild().args(["pull", &name]), LIMIT);
    assert_eq!(out.trim(), src.manifest);
    run_ok(dst.jbuild().arg("check"), LIMIT);
}
