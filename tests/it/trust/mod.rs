//! Signatures cosign understands, against the real Distribution registry
//! and the real cosign (v2.4.1, installed by tests/run from the Go module
//! proxy): jbuild signs and cosign verifies, cosign signs and jbuild
//! verifies, a tampered signature or a moved one fails both ways, keys
//! made by either tool work in the other, a signature made in the store
//! travels with `jbuild push`, attestations both ways, and no key or
//! password reaches any output. cosign never touches the network
//! (`--tlog-upload=false`, `--insecure-ignore-tlog`, `--offline`).

use crate::support::registry as registry_support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use registry_support::{fails_with, http, run_bounded, succeeds, text, Registry, World, LIMIT};

/// Build attestations.
mod attest;
/// The pull policy.
mod policy;

const PASSWORD: &str = "correct-horse-7f3a9c";

/// The cosign binary: on PATH, or where `go install` puts it. Its absence
/// fails the test (tests/run installs it).
fn cosign_bin() -> PathBuf {
    let gopath = Command::new("go")
        .args(["env", "GOPATH"])
        .output()
        .ok()
        .map(|o| text(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/root/go".into());
    let candidates = [
        PathBuf::from(&gopath).join("bin/cosign"),
        PathBuf::from("/usr/local/bin/cosign"),
        PathBuf::from("/usr/bin/cosign"),
    ];
    candidates.into_iter().find(|p| p.exists()).expect(
        "cosign is missing: tests/run installs github.com/sigstore/cosign/v2/cmd/cosign@v2.4.1",
    )
}

/// cosign with its home, TUF cache and password in `home`; no network
/// service is named anywhere.
fn cosign(home: &Path) -> Command {
    let mut c = Command::new(cosign_bin());
    c.current_dir(home)
        .env("HOME", home)
        .env("DOCKER_CONFIG", home.join("docker"))
        .env("TUF_ROOT", home.join("tuf"))
        .env("SIGSTORE_NO_CACHE", "1")
        .env("COSIGN_PASSWORD", PASSWORD)
        .env("COSIGN_EXPERIMENTAL", "0");
    c
}

/// A key pair made by `cosign generate-key-pair` in `home`:
/// (`cosign.key`, `cosign.pub`).
fn cosign_keys(home: &Path) -> (PathBuf, PathBuf) {
    succeeds(&run_bounded(
        cosign(home).args(["generate-key-pair"]),
        LIMIT,
    ));
    (home.join("cosign.key"), home.join("cosign.pub"))
}

fn cosign_verify(home: &Path, key: &Path, image: &str) -> Output {
    run_bounded(
        cosign(home).args(["verify", "--key"]).arg(key).args([
            "--insecure-ignore-tlog=true",
            "--offline=true",
            "--allow-http-registry=true",
            image,
        ]),
        LIMIT,
    )
}

fn cosign_sign(home: &Path, key: &Path, image: &str) -> Output {
    run_bounded(
        cosign(home).args(["sign", "--key"]).arg(key).args([
            "--tlog-upload=false",
            "--allow-http-registry=true",
            "--yes",
            image,
        ]),
        LIMIT,
    )
}

fn jbuild(w: &World) -> Command {
    let mut c = w.jbuild();
    c.env("COSIGN_PASSWORD", PASSWORD);
    c
}

/// `jbuild ARGS…` in `w`'s state root, with the key's password set.
fn jb<S: AsRef<OsStr>>(w: &World, args: impl IntoIterator<Item = S>) -> Output {
    run_bounded(jbuild(w).args(args), LIMIT)
}

/// A new key pair `PREFIX.key`, `PREFIX.pub` made by jbuild.
fn jb_keys(w: &World, prefix: &Path) -> String {
    let args = [
        OsStr::new("generate-key-pair"),
        "--output-key-prefix".as_ref(),
        prefix.as_os_str(),
    ];
    succeeds(&jb(w, args))
}

/// `jbuild COMMAND --key KEY IMAGE`.
fn jb_key(w: &World, command: &str, key: &Path, image: &str) -> Output {
    let args = [
        command.as_ref(),
        OsStr::new("--key"),
        key.as_os_str(),
        image.as_ref(),
    ];
    jb(w, args)
}

/// `jbuild sign --key KEY IMAGE`.
fn jb_sign(w: &World, key: &Path, image: &str) -> Output {
    jb_key(w, "sign", key, image)
}

/// `jbuild verify-signature --key PUB IMAGE`.
fn jb_verify(w: &World, public: &Path, image: &str) -> Output {
    jb_key(w, "verify-signature", public, image)
}

/// The store's `app:1` pushed to `reg` as `repo:1`; returns `host/repo@digest`.
fn pushed(w: &World, reg: &Registry, repo: &str) -> String {
    let dest = format!("{}/{repo}:1", reg.host());
    succeeds(&run_bounded(
        jbuild(w).args(["push", "app:1", &dest]),
        LIMIT,
    ));
    format!("{}/{repo}@{}", reg.host(), w.manifest)
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

fn get_manifest(reg: &Registry, repo: &str, reference: &str) -> serde_json::Value {
    let r = http()
        .get(format!(
            "http://{}/v2/{repo}/manifests/{reference}",
            reg.host()
        ))
        .header("Accept", OCI_MANIFEST)
        .send()
        .unwrap();
    assert!(r.status().is_success(), "GET {reference}: {}", r.status());
    serde_json::from_slice(&r.bytes().unwrap()).unwrap()
}

fn put_manifest(reg: &Registry, repo: &str, reference: &str, m: &serde_json::Value) {
    let r = http()
        .put(format!(
            "http://{}/v2/{repo}/manifests/{reference}",
            reg.host()
        ))
        .header("Content-Type", OCI_MANIFEST)
        .body(serde_json::to_vec(m).unwrap())
        .send()
        .unwrap();
    assert!(r.status().is_success(), "PUT {reference}: {}", r.status());
}

fn sig_tag(digest: &str) -> String {
    format!("sha256-{}.sig", digest.trim_start_matches("sha256:"))
}

/// jbuild makes the keys and signs; cosign verifies. Then the signature
/// is tampered with (one character of the base64 changed), and then a
/// genuine signature of another image is moved onto this one: both are
/// refused by cosign and by jbuild, exit 1, naming the reason.
#[test]
fn jbuild_signs_cosign_verifies_and_tampering_fails_both_ways() {
    let reg = Registry::start();
    let w = World::new(4096);
    let home = w.tmp.path();
    let out = jb_keys(&w, &home.join("jb"));
    assert!(out.contains("jb.key") && out.contains("jb.pub"), "{out}");
    let (key, public) = (home.join("jb.key"), home.join("jb.pub"));
    let image = pushed(&w, &reg, "signed/app");
    let remote = format!("docker://{image}");

    let signed = succeeds(&jb_sign(&w, &key, &remote));
    assert!(signed.contains(&sig_tag(&w.manifest)), "{signed}");
    succeeds(&cosign_verify(home, &public, &image));
    let ours = succeeds(&jb_verify(&w, &public, &remote));
    assert!(ours.contains(&w.manifest), "{ours}");

    // Tampered: the signature's base64 changed in one place.
    let tag = sig_tag(&w.manifest);
    let mut bad = get_manifest(&reg, "signed/app", &tag);
    let annotation = &mut bad["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"];
    let mut chars: Vec<char> = annotation.as_str().unwrap().chars().collect();
    chars[20] = if chars[20] == 'A' { 'B' } else { 'A' };
    *annotation = chars.into_iter().collect::<String>().into();
    put_manifest(&reg, "signed/app", &tag, &bad);
    let c = cosign_verify(home, &public, &image);
    assert!(!c.status.success(), "cosign accepted a tampered signature");
    fails_with(
        &jb_verify(&w, &public, &remote),
        1,
        "is not the key's signature of its payload",
    );

    // Moved: a genuine signature of another image, put under this one's
    // tag, with the blobs it names mounted into this repository.
    let other = World::new(2048);
    let other_image = pushed(&other, &reg, "signed/other");
    succeeds(&jb_sign(&other, &key, &format!("docker://{other_image}")));
    let moved = get_manifest(&reg, "signed/other", &sig_tag(&other.manifest));
    for blob in [&moved["layers"][0]["digest"], &moved["config"]["digest"]] {
        let r = http()
            .post(format!(
                "http://{}/v2/signed/app/blobs/uploads/?mount={}&from=signed/other",
                reg.host(),
                blob.as_str().unwrap()
            ))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "mount {blob}");
    }
    put_manifest(&reg, "signed/app", &tag, &moved);
    let c = cosign_verify(home, &public, &image);
    assert!(
        !c.status.success(),
        "cosign accepted another image's signature"
    );
    fails_with(
        &jb_verify(&w, &public, &remote),
        1,
        &format!("not for the image's digest {}", w.manifest),
    );

    // And an image with no signature at all.
    succeeds(&jb(
        &other,
        ["push", "app:1", &format!("{}/signed/app:other", reg.host())],
    ));
    fails_with(
        &jb_verify(
            &w,
            &public,
            &format!("docker://{}/signed/app:other", reg.host()),
        ),
        1,
        "has no signatures",
    );
}

/// cosign makes the keys and signs; jbuild verifies, and signs with
/// cosign's key too (appending to the same `.sig`), which cosign accepts.
#[test]
fn cosign_signs_jbuild_verifies_and_keys_cross_over() {
    let reg = Registry::start();
    let w = World::new(4096);
    let home = w.tmp.path();
    let (key, public) = cosign_keys(home);
    let image = pushed(&w, &reg, "cosigned/app");
    let remote = format!("docker://{image}");
    succeeds(&cosign_sign(home, &key, &image));
    let ours = succeeds(&jb_verify(&w, &public, &remote));
    assert!(ours.contains(&w.manifest), "{ours}");

    // A key jbuild made verifies nothing cosign signed with its own.
    jb_keys(&w, &home.join("jb"));
    fails_with(
        &jb_verify(&w, &home.join("jb.pub"), &remote),
        1,
        "is not the key's signature",
    );

    // jbuild signs with cosign's key; jbuild's key signs for cosign.
    let signed = succeeds(&jb_sign(&w, &key, &remote));
    assert!(signed.contains("2 signature(s)"), "{signed}");
    succeeds(&jb_sign(&w, &home.join("jb.key"), &remote));
    succeeds(&cosign_verify(home, &home.join("jb.pub"), &image));
    succeeds(&cosign_verify(home, &public, &image));

    // cosign signs with a key jbuild made.
    let w2 = World::new(1024);
    let image2 = pushed(&w2, &reg, "cosigned/two");
    succeeds(&cosign_sign(home, &home.join("jb.key"), &image2));
    succeeds(&jb_verify(
        &w,
        &home.join("jb.pub"),
        &format!("docker://{image2}"),
    ));
}

/// A signature made in the store is kept beside the image (not listed as
/// an image), verifies there, `jbuild push` takes it to the registry,
/// where cosign accepts it, and `jbuild rmi` of the image's last name
/// takes it away.
#[test]
fn a_store_signature_travels_with_push() {
    let reg = Registry::start();
    let w = World::new(4096);
    let home = w.tmp.path();
    jb_keys(&w, &home.join("k"));
    let mode = |f: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(home.join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!((mode("k.key"), mode("k.pub")), (0o600, 0o644));
    fails_with(
        &jb(
            &w,
            [
                OsStr::new("generate-key-pair"),
                "--output-key-prefix".as_ref(),
                home.join("k").as_os_str(),
            ],
        ),
        1,
        "k.key exists",
    );
    succeeds(&jb_sign(&w, &home.join("k.key"), "app:1"));
    let images = succeeds(&jb(&w, ["images"]));
    assert!(!images.contains(".sig"), "{images}");
    assert_eq!(images.lines().count(), 2, "{images}");
    succeeds(&jb_verify(&w, &home.join("k.pub"), "app:1"));
    succeeds(&jb(&w, ["check"]));
    let image = pushed(&w, &reg, "carried/app");
    succeeds(&cosign_verify(home, &home.join("k.pub"), &image));

    // The image's last name takes its signature along; then nothing is
    // kept alive unseen (the signature's subject is the image).
    let removed = succeeds(&jb(&w, ["rmi", "app:1"]));
    assert!(removed.contains(&sig_tag(&w.manifest)), "{removed}");
    succeeds(&jb(&w, ["prune"]));
    let check = succeeds(&jb(&w, ["check"]));
    assert!(check.contains("0 images, 0 blobs"), "{check}");
}

/// Attestations: cosign attests SLSA provenance and jbuild reads it back;
/// jbuild's library attests and cosign's verify-attestation accepts it.
#[test]
fn attestations_cross_over_both_ways() {
    use jbuild::trust::{self, RegistryPlace};
    let reg = Registry::start();
    let w = World::new(1024);
    let home = w.tmp.path();
    let (key, public) = cosign_keys(home);
    let image = pushed(&w, &reg, "attested/app");
    let predicate = serde_json::json!({
        "builder": {"id": "https://example.org/jbuild"},
        "buildType": "https://example.org/jailfile",
        "invocation": {"parameters": {"VERSION": "1"}},
    });
    std::fs::write(home.join("pred.json"), predicate.to_string()).unwrap();
    succeeds(&run_bounded(
        cosign(home).args(["attest", "--key"]).arg(&key).args([
            "--type",
            "slsaprovenance",
            "--predicate",
            "pred.json",
            "--tlog-upload=false",
            "--allow-http-registry=true",
            "--yes",
            &image,
        ]),
        LIMIT,
    ));
    let verify_attestation = |kind: &str| {
        jb(
            &w,
            [
                OsStr::new("verify-attestation"),
                "--key".as_ref(),
                public.as_os_str(),
                "--type".as_ref(),
                kind.as_ref(),
                format!("docker://{image}").as_ref(),
            ],
        )
    };
    let ours = succeeds(&verify_attestation("slsaprovenance"));
    assert!(ours.contains("https://slsa.dev/provenance/v0.2"), "{ours}");
    fails_with(
        &verify_attestation("slsaprovenance1"),
        1,
        "not https://slsa.dev/provenance/v1",
    );

    // jbuild's library attests (the API `build --provenance` builds on).
    let w2 = World::new(1024);
    let image2 = pushed(&w2, &reg, "attested/two");
    let signing =
        trust::read_signing_key(&key, &mut || Some(jbuild::keychain::Secret::new(PASSWORD)))
            .unwrap();
    let place = RegistryPlace::new(
        jbuild::transport::RegistryRef::parse(&image2).unwrap(),
        jbuild::transport::RegistryOptions::default(),
    );
    trust::attest(
        &place,
        Some(&signing),
        trust::dsse::predicate_type("slsaprovenance"),
        predicate.clone(),
    )
    .unwrap();
    succeeds(&run_bounded(
        cosign(home)
            .args(["verify-attestation", "--key"])
            .arg(&public)
            .args([
                "--type",
                "slsaprovenance",
                "--insecure-ignore-tlog=true",
                "--offline=true",
                "--allow-http-registry=true",
                &image2,
            ]),
        LIMIT,
    ));
    let back = trust::verify_attestations(&place, &signing.public(), None).unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].predicate, predicate);
}

/// No key or password reaches standard output, standard error or
/// `--json`, at RUST_LOG=trace, whether the command succeeds or the
/// password is wrong or missing.
#[test]
fn keys_and_passwords_never_reach_any_output() {
    let reg = Registry::start();
    let w = World::new(1024);
    let home = w.tmp.path();
    let key = home.join("k.key");
    let mut outputs = Vec::new();
    let mut run = |c: &mut Command| {
        c.env("RUST_LOG", "trace");
        let o = run_bounded(c, LIMIT);
        outputs.push(format!("{}{}", text(&o.stdout), text(&o.stderr)));
        o
    };
    succeeds(&run(jbuild(&w)
        .args(["--json", "generate-key-pair", "--output-key-prefix"])
        .arg(home.join("k"))));
    let image = pushed(&w, &reg, "secret/app");
    succeeds(&run(jbuild(&w)
        .args(["--json", "sign", "--key"])
        .arg(&key)
        .arg(format!("docker://{image}"))));
    succeeds(&run(jbuild(&w)
        .args(["sign", "--key"])
        .arg(&key)
        .arg("app:1")));
    let wrong = run(jbuild(&w)
        .env("COSIGN_PASSWORD", "not-the-password-91b2")
        .args(["sign", "--key"])
        .arg(&key)
        .arg("app:1"));
    fails_with(&wrong, 1, "the password does not open the key");
    let none = run(jbuild(&w)
        .env_remove("COSIGN_PASSWORD")
        .args(["sign", "--key"])
        .arg(&key)
        .arg("app:1"));
    fails_with(&none, 1, "set COSIGN_PASSWORD");

    let key_pem = std::fs::read_to_string(&key).unwrap();
    let key_body: String = key_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let secrets = [
        PASSWORD.to_string(),
        "not-the-password-91b2".to_string(),
        key_body[..40].to_string(),
        key_body[key_body.len() - 40..].to_string(),
    ];
    assert!(!outputs.iter().all(|o| o.is_empty()));
    for o in &outputs {
        for s in &secrets {
            assert!(!o.contains(s.as_str()), "a secret reached the output:\n{o}");
        }
    }
}

/// On a terminal, without $COSIGN_PASSWORD: generate-key-pair asks twice
/// without echo, sign asks once, and the key opens for cosign with that
/// password.
#[test]
fn the_password_is_asked_on_a_terminal_without_echo() {
    use registry_support::pty::{wait, Pty};
    let reg = Registry::start();
    let w = World::new(1024);
    let home = w.tmp.path();
    let typed = "typed-on-the-tty-5e1";
    let (mut pty, mut child) = Pty::spawn(
        w.jbuild()
            .env_remove("COSIGN_PASSWORD")
            .args(["generate-key-pair", "--output-key-prefix"])
            .arg(home.join("tty")),
    );
    pty.expect("Enter password for private key: ");
    pty.type_line(typed);
    pty.expect("Enter password for private key again: ");
    pty.type_line(typed);
    let status = wait(&mut child);
    std::thread::sleep(Duration::from_millis(200));
    let screen = pty.seen();
    assert!(status.success(), "{status}; the terminal shows:\n{screen}");
    assert!(
        !screen.contains(typed),
        "the password was echoed:\n{screen}"
    );

    let image = pushed(&w, &reg, "tty/app");
    let (mut pty, mut child) = Pty::spawn(
        w.jbuild()
            .env_remove("COSIGN_PASSWORD")
            .args(["sign", "--key"])
            .arg(home.join("tty.key"))
            .arg(format!("docker://{image}")),
    );
    pty.expect("Enter password for private key: ");
    pty.type_line(typed);
    let status = wait(&mut child);
    std::thread::sleep(Duration::from_millis(200));
    let screen = pty.seen();
    assert!(status.success(), "{status}; the terminal shows:\n{screen}");
    assert!(
        !screen.contains(typed),
        "the password was echoed:\n{screen}"
    );
    succeeds(&cosign_verify(home, &home.join("tty.pub"), &image));
    // cosign opens the key with the password typed.
    let w2 = World::new(512);
    let image2 = pushed(&w2, &reg, "tty/two");
    succeeds(&run_bounded(
        cosign(home)
            .env("COSIGN_PASSWORD", typed)
            .args(["sign", "--key"])
            .arg(home.join("tty.key"))
            .args([
                "--tlog-upload=false",
                "--allow-http-registry=true",
                "--yes",
                &image2,
            ]),
        LIMIT,
    ));
}
