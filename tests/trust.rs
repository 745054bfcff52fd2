//! Signatures cosign understands, against the real Distribution registry
//! and the real cosign (v2.4.1, installed by tests/run from the Go module
//! proxy): jbuild signs and cosign verifies, cosign signs and jbuild
//! verifies, a tampered signature or a moved one fails both ways, keys
//! made by either tool work in the other, a signature made in the store
//! travels with `jbuild push`, attestations both ways, and no key or
//! password reaches any output. cosign never touches the network
//! (`--tlog-upload=false`, `--insecure-ignore-tlog`, `--offline`).

mod registry_support;
mod tar_support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use registry_support::{fails_with, http, run_bounded, succeeds, text, Registry, World, LIMIT};

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
    succeeds(&run_bounded(
        cosign(home).args(["generate-key-pair"]),
        LIMIT,
    ));
    let (key, public) = (home.join("cosign.key"), home.join("cosign.pub"));
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
    succeeds(&run_bounded(
        cosign(home).args(["generate-key-pair"]),
        LIMIT,
    ));
    let (key, public) = (home.join("cosign.key"), home.join("cosign.pub"));
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

// ----- the pull policy (docs/policy.md) -----

/// What a state root holds: `jbuild images`, `jbuild --json check`, and
/// every file of the store and the snapshots (lock files aside) with its
/// size and, when small, its bytes. A refused pull changes none of it.
/// (`jbuild images` notes layer sizes the first time: take this twice
/// before comparing.)
fn store_state(w: &World) -> State {
    fn walk(dir: &Path, top: &Path, out: &mut Vec<(String, u64, Vec<u8>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(top).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                // Directories alone are the backend's layout, made when it
                // is first opened; what is stored is in files.
                walk(&p, top, out);
            } else if !(rel.ends_with("lock") && meta.len() == 0) {
                let small = meta.is_file() && meta.len() < 65536;
                let bytes = if small {
                    std::fs::read(&p).unwrap()
                } else {
                    Vec::new()
                };
                out.push((rel, meta.len(), bytes));
            }
        }
    }
    let mut files = Vec::new();
    walk(&w.path("root"), &w.path("root"), &mut files);
    files.sort();
    let images = succeeds(&jb(w, ["images"]));
    let check = succeeds(&jb(w, ["--json", "check"]));
    (images, check, files)
}

type State = (String, String, Vec<(String, u64, Vec<u8>)>);

/// Requires the state root unchanged, naming what changed.
fn assert_same(before: &State, after: &State, err: &str) {
    assert_eq!(before.0, after.0, "`jbuild images` changed\n{err}");
    assert_eq!(before.1, after.1, "`jbuild check` changed\n{err}");
    let changed: Vec<&String> = after
        .2
        .iter()
        .filter(|f| !before.2.contains(f))
        .chain(before.2.iter().filter(|f| !after.2.contains(f)))
        .map(|f| &f.0)
        .collect();
    assert!(changed.is_empty(), "the store changed: {changed:?}\n{err}");
}

/// `jbuild ARGS… --signature-policy POLICY`.
fn jb_policy(w: &World, policy: &Path, args: &[&str]) -> Output {
    run_bounded(
        jbuild(w).args(args).arg("--signature-policy").arg(policy),
        LIMIT,
    )
}

/// `cosign verify-attestation --key PUB --type TYPE IMAGE`.
fn cosign_verify_attestation(home: &Path, key: &Path, kind: &str, image: &str) -> Output {
    run_bounded(
        cosign(home)
            .args(["verify-attestation", "--key"])
            .arg(key)
            .args([
                "--type",
                kind,
                "--insecure-ignore-tlog=true",
                "--offline=true",
                "--allow-http-registry=true",
                image,
            ]),
        LIMIT,
    )
}

/// A refused command: exit 1, the rule named (file, scope, requirement),
/// and the state root as it was.
fn refused(w: &World, out: &Output, before: &State, rule: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("refused by the policy"), "{err}");
    for part in rule {
        assert!(err.contains(part), "wanted `{part}` in:\n{err}");
    }
    assert_same(before, &store_state(w), &err);
}

/// The pull policy against the real registry, cosign and jbuild sign:
/// a repository that requires signatures refuses an unsigned image (exit
/// 1, naming the file, scope and requirement; nothing stored), accepts
/// one cosign signed and one `jbuild sign` signed, `reject` refuses, the
/// most specific scope wins, a signature by another key is refused, and
/// policy.json's default identity (matchRepoDigestOrExact) refuses
/// cosign's repository-only signature for a tag but accepts it by digest.
#[test]
fn the_pull_policy_refuses_unsigned_and_accepts_signed_images() {
    let reg = Registry::start();
    let w = World::new(2048);
    let home = w.tmp.path();
    let host = reg.host();
    succeeds(&run_bounded(
        cosign(home).args(["generate-key-pair"]),
        LIMIT,
    ));
    let (key, public) = (home.join("cosign.key"), home.join("cosign.pub"));
    jb_keys(&w, &home.join("jb"));
    for repo in [
        "signed/app",
        "jbsigned/app",
        "unsigned/app",
        "rejected/app",
        "open/app",
        "exact/app",
        "otherkey/app",
    ] {
        pushed(&w, &reg, repo);
    }
    succeeds(&jb(&w, ["push", "app:1", &format!("{host}/open/app:2")]));
    succeeds(&cosign_sign(
        home,
        &key,
        &format!("{host}/signed/app@{}", w.manifest),
    ));
    succeeds(&cosign_sign(
        home,
        &key,
        &format!("{host}/exact/app@{}", w.manifest),
    ));
    succeeds(&jb_sign(
        &w,
        &home.join("jb.key"),
        &format!("docker://{host}/jbsigned/app:1"),
    ));
    succeeds(&jb_sign(
        &w,
        &home.join("jb.key"),
        &format!("docker://{host}/otherkey/app:1"),
    ));

    let policy = home.join("policy.json");
    let sigstore = |key: &Path| {
        serde_json::json!([{"type": "sigstoreSigned", "keyPath": key,
            "signedIdentity": {"type": "matchRepository"}}])
    };
    let doc = serde_json::json!({
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker": {
            host.clone(): [{"type": "sigstoreSigned", "keyPath": public}],
            format!("{host}/signed"): sigstore(&public),
            format!("{host}/otherkey"): sigstore(&public),
            format!("{host}/jbsigned/app"): sigstore(&home.join("jb.pub")),
            format!("{host}/rejected"): [{"type": "reject"}],
            format!("{host}/open/app:1"): [{"type": "insecureAcceptAnything"}],
        }}
    });
    std::fs::write(&policy, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let file = policy.display().to_string();

    // Pulls go into a second state root, which starts with its own image.
    let p = World::new(256);
    let pull = |image: &str| jb_policy(&p, &policy, &["pull", image]);
    store_state(&p);
    let before = store_state(&p);
    let unsigned = format!("{host}/unsigned/app:1");
    refused(
        &p,
        &pull(&unsigned),
        &before,
        &[
            &file,
            &format!("scope `{host}`"),
            "sigstoreSigned",
            "no signatures",
        ],
    );
    let rejected = format!("{host}/rejected/app:1");
    refused(
        &p,
        &pull(&rejected),
        &before,
        &[
            &file,
            &format!("scope `{host}/rejected`"),
            "requirement reject",
        ],
    );
    // Scope precedence: the tag's own scope over the host's.
    refused(
        &p,
        &pull(&format!("{host}/open/app:2")),
        &before,
        &[&format!("scope `{host}`")],
    );
    // Signed, but by a key the scope does not name.
    refused(
        &p,
        &pull(&format!("{host}/otherkey/app:1")),
        &before,
        &[
            &format!("scope `{host}/otherkey`"),
            "not the key's signature",
        ],
    );
    // policy.json's default identity wants the tag in the signature.
    refused(
        &p,
        &pull(&format!("{host}/exact/app:1")),
        &before,
        &["matchRepoDigestOrExact", "matchRepository"],
    );

    succeeds(&pull(&format!("{host}/exact/app@{}", w.manifest)));
    succeeds(&pull(&format!("{host}/open/app:1")));
    succeeds(&pull(&format!("{host}/signed/app:1")));
    succeeds(&pull(&format!("{host}/jbsigned/app:1")));
    let images = succeeds(&jb(&p, ["images"]));
    for name in ["open/app", "signed/app", "jbsigned/app"] {
        assert!(
            images.contains(&format!("{host}/{name}")),
            "{name} is not in:\n{images}"
        );
    }
}

/// A build's FROM and `jbuild create docker://…` honour the policy too,
/// here from the configuration file's `[trust]`: the unsigned base is
/// refused with the rule named and nothing stored; the signed one builds
/// and makes a jail. `--signature-policy` wins over `[trust]`.
#[test]
fn from_and_create_honour_trust_in_the_configuration() {
    let reg = Registry::start();
    let w = World::new(1024);
    let home = w.tmp.path();
    let host = reg.host();
    jb_keys(&w, &home.join("jb"));
    pushed(&w, &reg, "team/signed");
    pushed(&w, &reg, "team/unsigned");
    succeeds(&jb_sign(
        &w,
        &home.join("jb.key"),
        &format!("docker://{host}/team/signed:1"),
    ));

    let p = World::new(256);
    let config = p.path("jbuild.toml");
    std::fs::write(
        &config,
        format!(
            "[trust]\ndefault = \"reject\"\n\n[[trust.scope]]\nname = \"{host}/team\"\n\
             require = \"sigstoreSigned\"\nkey = \"{}\"\n",
            home.join("jb.pub").display()
        ),
    )
    .unwrap();
    let origin = format!("{} [trust]", config.display());
    let context = p.path("context");
    std::fs::create_dir_all(&context).unwrap();
    let build = |base: &str| {
        std::fs::write(
            context.join("Jailfile"),
            format!("FROM {base}\nLABEL built=here\n"),
        )
        .unwrap();
        let mut c = jbuild(&p);
        c.args(["build", "-t", "web:1"]).arg(&context);
        run_bounded(&mut c, LIMIT)
    };
    store_state(&p);
    let before = store_state(&p);
    let out = build(&format!("{host}/team/unsigned:1"));
    refused(
        &p,
        &out,
        &before,
        &[&origin, &format!("scope `{host}/team`"), "sigstoreSigned"],
    );
    let create = |image: &str, name: &str| {
        let mut c = jbuild(&p);
        c.args(["create", image, name, "--path"])
            .arg(p.path(name))
            .arg("--conf")
            .arg(p.path(&format!("{name}.conf")));
        run_bounded(&mut c, LIMIT)
    };
    let out = create(&format!("docker://{host}/team/unsigned:1"), "bad");
    refused(&p, &out, &before, &[&origin, "sigstoreSigned"]);
    assert!(!p.path("bad.conf").exists());
    // The policy's default (no scope names this repository).
    let out = create(&format!("docker://{host}/elsewhere/app:1"), "bad");
    refused(
        &p,
        &out,
        &before,
        &[&origin, "scope `default`", "requirement reject"],
    );

    succeeds(&build(&format!("{host}/team/signed:1")));
    succeeds(&create(&format!("docker://{host}/team/signed:1"), "good"));
    assert_eq!(
        std::fs::read_to_string(p.path("good/etc/motd")).unwrap(),
        "hello from world\n"
    );

    // --signature-policy wins over [trust].
    let open = p.path("open.json");
    std::fs::write(&open, r#"{"default":[{"type":"insecureAcceptAnything"}]}"#).unwrap();
    succeeds(&jb_policy(
        &p,
        &open,
        &["pull", &format!("{host}/team/unsigned:1")],
    ));
}

/// A policy jbuild cannot honour fully is refused before any registry is
/// asked, exit 1, naming the file and what to do: GPG's signedBy, an
/// unknown requirement type or field, a relative key path, a bad scope,
/// a file that is not JSON or is huge, a missing file.
#[test]
fn a_policy_jbuild_cannot_honour_is_refused_naming_the_file() {
    let w = World::new(256);
    store_state(&w);
    let before = store_state(&w);
    let cases: &[(&str, &[u8], &str)] = &[
        ("gpg", br#"{"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k.gpg"}]}"#, "signedBy"),
        ("unknown", br#"{"default":[{"type":"trustEveryone"}]}"#, "`trustEveryone`"),
        ("field", br#"{"default":[{"type":"reject"}],"extras":{}}"#, "`extras`"),
        ("relative", br#"{"default":[{"type":"sigstoreSigned","keyPath":"cosign.pub"}]}"#, "absolute"),
        ("scope", br#"{"default":[{"type":"reject"}],"transports":{"docker":{"team/app":[{"type":"reject"}]}}}"#, "registry host"),
        ("notjson", b"\x7fELF\x02\x01", "not JSON"),
        ("huge", &[b' '; (1 << 20) + 1], "not a policy"),
    ];
    for (name, bytes, wanted) in cases {
        let file = w.path(&format!("{name}.json"));
        std::fs::write(&file, bytes).unwrap();
        // Port 1: nothing listens, so an error naming the file was not the
        // registry's.
        let out = jb_policy(&w, &file, &["pull", "127.0.0.1:1/team/app:1"]);
        fails_with(&out, 1, wanted);
        fails_with(&out, 1, &file.display().to_string());
    }
    let missing = w.path("missing.json");
    let out = jb_policy(&w, &missing, &["pull", "127.0.0.1:1/team/app:1"]);
    fails_with(&out, 1, &missing.display().to_string());
    assert_same(&before, &store_state(&w), "");
}

/// A multi-platform tag is judged as `cosign verify` judges it: by the
/// signature of the index's digest (what `cosign sign` of the tag signs),
/// after which the platform's manifest comes from that very index. A
/// signature of the platform's manifest alone satisfies neither cosign
/// nor the policy.
#[test]
fn a_multi_platform_tag_is_judged_by_its_index_signature_as_cosign_does() {
    use oci_spec::image::{Arch, Os};
    let reg = Registry::start();
    let w = World::new(1024);
    let home = w.tmp.path();
    let host = reg.host();
    succeeds(&run_bounded(
        cosign(home).args(["generate-key-pair"]),
        LIMIT,
    ));
    let (key, public) = (home.join("cosign.key"), home.join("cosign.pub"));
    let files = vec![vec![("etc/motd", b"arm\n".to_vec())]];
    let (arm, _) = registry_support::image::put_image(
        &w.store,
        Os::FreeBSD,
        Arch::ARM64,
        &files,
        Default::default(),
    );
    w.store
        .tag(&jbuild::store::ImageName::parse("app:arm").unwrap(), &arm)
        .unwrap();
    succeeds(&jb(
        &w,
        ["manifest", "create", "app:multi", "app:1", "app:arm"],
    ));
    let digestfile = home.join("index.digest");
    for repo in ["multi/app", "platform-only/app"] {
        let dest = format!("{host}/{repo}:1");
        let args = [
            OsStr::new("push"),
            "--digestfile".as_ref(),
            digestfile.as_os_str(),
            "app:multi".as_ref(),
            dest.as_ref(),
        ];
        succeeds(&jb(&w, args));
    }
    let index = std::fs::read_to_string(&digestfile).unwrap();
    assert_ne!(index, w.manifest);
    succeeds(&cosign_sign(
        home,
        &key,
        &format!("{host}/multi/app@{index}"),
    ));
    succeeds(&cosign_sign(
        home,
        &key,
        &format!("{host}/platform-only/app@{}", w.manifest),
    ));
    succeeds(&cosign_verify(
        home,
        &public,
        &format!("{host}/multi/app:1"),
    ));
    let out = cosign_verify(home, &public, &format!("{host}/platform-only/app:1"));
    assert!(
        !out.status.success(),
        "cosign accepted a platform-only signature"
    );

    let policy = home.join("policy.json");
    let doc = serde_json::json!({
        "default": [{"type": "insecureAcceptAnything"}],
        "transports": {"docker": {host.clone(): [{"type": "sigstoreSigned", "keyPath": public,
            "signedIdentity": {"type": "matchRepository"}}]}}
    });
    std::fs::write(&policy, serde_json::to_vec(&doc).unwrap()).unwrap();
    let p = World::new(256);
    store_state(&p);
    let before = store_state(&p);
    let out = jb_policy(
        &p,
        &policy,
        &["pull", &format!("{host}/platform-only/app:1")],
    );
    refused(
        &p,
        &out,
        &before,
        &[&format!("scope `{host}`"), &index["sha256:".len()..]],
    );
    // Accepted: the host's platform (freebsd/amd64) from the signed index.
    let pulled = succeeds(&jb_policy(
        &p,
        &policy,
        &["pull", &format!("{host}/multi/app:1")],
    ));
    assert!(pulled.contains(&w.manifest), "{pulled}");
}

/// `jbuild import` honours the policy by transport, as podman does:
/// `oci:` images by the scopes of `transports.oci` (the directory, its
/// parents, the tag), then `default`; `sigstoreSigned` is refused for them
/// (jbuild checks signatures in registries only); `docker://` as pull.
#[test]
fn import_honours_the_policy_by_transport() {
    let reg = Registry::start();
    let w = World::new(512);
    let home = w.tmp.path();
    let host = reg.host();
    pushed(&w, &reg, "unsigned/app");
    let (trusted, other) = (home.join("trusted"), home.join("other"));
    std::fs::create_dir_all(&trusted).unwrap();
    for dir in [trusted.join("layout"), other.clone()] {
        let dest = format!("oci:{}:app", dir.display());
        succeeds(&jb(&w, ["copy", "app:1", &dest]));
    }
    jb_keys(&w, &home.join("jb"));
    let policy = home.join("policy.json");
    let doc = serde_json::json!({
        "default": [{"type": "reject"}],
        "transports": {
            "oci": {
                trusted.display().to_string(): [{"type": "insecureAcceptAnything"}],
                format!("{}:app", other.display()): [{"type": "sigstoreSigned",
                    "keyPath": home.join("jb.pub")}],
            },
            "docker": {host.clone(): [{"type": "sigstoreSigned", "keyPath": home.join("jb.pub")}]}
        }
    });
    std::fs::write(&policy, serde_json::to_vec(&doc).unwrap()).unwrap();
    let p = World::new(256);
    store_state(&p);
    let before = store_state(&p);
    let import = |location: &str| jb_policy(&p, &policy, &["import", location, "got:1"]);
    let out = import(&format!("oci:{}", other.display()));
    refused(
        &p,
        &out,
        &before,
        &["scope `default`", "requirement reject"],
    );
    let out = import(&format!("oci:{}:app", other.display()));
    refused(
        &p,
        &out,
        &before,
        &[
            &format!("scope `{}:app`", other.display()),
            "registries only",
        ],
    );
    let out = import(&format!("docker://{host}/unsigned/app:1"));
    refused(
        &p,
        &out,
        &before,
        &[&format!("scope `{host}`"), "no signatures"],
    );
    // A parent directory's scope covers the layouts under it.
    succeeds(&import(&format!(
        "oci:{}:app",
        trusted.join("layout").display()
    )));
    let images = succeeds(&jb(&p, ["images"]));
    assert!(images.contains("got"), "{images}");
}

/// The in-toto statements of cosign's `verify-attestation` output (one
/// DSSE envelope a line, its payload base64).
fn statements_of(out: &str) -> Vec<serde_json::Value> {
    use base64::Engine;
    out.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let env: serde_json::Value = serde_json::from_str(l).unwrap();
            let payload = base64::engine::general_purpose::STANDARD
                .decode(env["payload"].as_str().unwrap())
                .unwrap();
            serde_json::from_slice(&payload).unwrap()
        })
        .collect()
}

/// The sorted SPDXIDs of the packages of an SPDX statement's document.
fn spdx_ids(statement: &serde_json::Value) -> Vec<String> {
    let mut ids: Vec<String> = statement["predicate"]["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["SPDXID"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// A native-only build context whose image depends on a build argument.
fn arg_context(dir: &Path) -> PathBuf {
    let ctx = dir.join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nARG PORT=80\nCOPY app.conf /usr/local/etc/app.conf\n\
         SYSRC app_port=${PORT}\n",
    )
    .unwrap();
    std::fs::write(ctx.join("app.conf"), "x=1\n").unwrap();
    ctx
}

/// [`arg_context`] whose image also has a pkg database (made from pkg's
/// schema) listing two packages, `curl` and `ca_root_nss`.
fn pkg_context(dir: &Path) -> PathBuf {
    let ctx = arg_context(dir);
    let db = rusqlite::Connection::open(ctx.join("local.sqlite")).unwrap();
    db.execute_batch(include_str!("fixtures/sbom/pkg-local-schema.sql"))
        .unwrap();
    for (id, name, origin) in [
        (1, "curl", "ftp/curl"),
        (2, "ca_root_nss", "security/ca_root_nss"),
    ] {
        db.execute(
            "INSERT INTO packages (id, origin, name, version, comment, desc, arch, maintainer, \
             prefix, flatsize, automatic, licenselogic) VALUES (?1, ?2, ?3, '1.0', 'c', 'd', \
             'FreeBSD:14:amd64', 'ports@FreeBSD.org', '/usr/local', 1, 0, 1)",
            rusqlite::params![id, origin, name],
        )
        .unwrap();
    }
    drop(db);
    let jailfile = ctx.join("Jailfile");
    let mut text = std::fs::read_to_string(&jailfile).unwrap();
    text.push_str("COPY local.sqlite /var/db/pkg/local.sqlite\n");
    std::fs::write(&jailfile, text).unwrap();
    ctx
}

/// `build --provenance --sbom --sign-with KEY --push`: cosign's
/// verify-attestation accepts both attestations in the registry, their
/// subject the image's digest; jbuild reads them back; `jbuild verify`
/// takes the build argument from the attached provenance (the rebuild
/// differs without it), verified by --key, and a key that did not sign it
/// is refused with exit 1.
#[test]
fn build_attests_provenance_and_sbom_that_cosign_verifies() {
    let reg = Registry::start();
    let w = World::new(512);
    let home = w.tmp.path();
    jb_keys(&w, &home.join("k"));
    jb_keys(&w, &home.join("other"));
    let ctx = pkg_context(home);
    let name = format!("{}/attested/built:1", reg.host());
    let key = home.join("k.key");
    let public = home.join("k.pub");
    let args = [
        OsStr::new("--json"),
        "build".as_ref(),
        "-t".as_ref(),
        name.as_ref(),
        "--build-arg".as_ref(),
        "PORT=8080".as_ref(),
        "--provenance".as_ref(),
        "--sbom".as_ref(),
        "--sign-with".as_ref(),
        key.as_os_str(),
        "--push".as_ref(),
        ctx.as_os_str(),
    ];
    let out = succeeds(&jb(&w, args));
    let result: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let digest = result["manifest"].as_str().unwrap().to_string();
    assert_eq!(result["attested"].as_array().unwrap().len(), 2, "{out}");
    let image = format!("{}/attested/built@{digest}", reg.host());

    let slsa = succeeds(&cosign_verify_attestation(
        home,
        &public,
        "slsaprovenance",
        &image,
    ));
    let statements = statements_of(&slsa);
    let prov = statements
        .iter()
        .find(|s| s["predicateType"] == "https://slsa.dev/provenance/v0.2")
        .unwrap_or_else(|| panic!("no provenance in {slsa}"));
    assert_eq!(
        prov["subject"][0]["digest"]["sha256"],
        digest.trim_start_matches("sha256:")
    );
    assert_eq!(
        prov["predicate"]["invocation"]["parameters"]["buildArgs"]["PORT"],
        "8080"
    );
    let spdx = succeeds(&cosign_verify_attestation(
        home, &public, "spdxjson", &image,
    ));
    let sbom = statements_of(&spdx)
        .into_iter()
        .find(|s| s["predicateType"] == "https://spdx.dev/Document")
        .unwrap_or_else(|| panic!("no SBOM in {spdx}"));
    assert_eq!(sbom["predicate"]["spdxVersion"], "SPDX-2.3");
    // Exactly the image's packages.
    assert_eq!(
        spdx_ids(&sbom),
        [
            "SPDXRef-Image",
            "SPDXRef-Package-ca-root-nss",
            "SPDXRef-Package-curl"
        ],
        "{sbom}"
    );
    for a in result["attested"].as_array().unwrap() {
        assert_eq!(a["digest"], digest.as_str(), "{out}");
        let tag = format!("sha256-{}.att", digest.trim_start_matches("sha256:"));
        assert_eq!(a["tag"], tag.as_str(), "{out}");
    }
    let c = cosign_verify_attestation(home, &home.join("other.pub"), "slsaprovenance", &image);
    assert!(!c.status.success(), "cosign accepted another key");

    // jbuild reads them back, from the registry and from the store.
    let types = [
        ("slsaprovenance", "https://slsa.dev/provenance/v0.2"),
        ("spdxjson", "https://spdx.dev/Document"),
    ];
    for place in [format!("docker://{image}"), name.clone()] {
        for (kind, uri) in types {
            let args = [
                OsStr::new("verify-attestation"),
                "--key".as_ref(),
                public.as_os_str(),
                "--type".as_ref(),
                kind.as_ref(),
                place.as_ref(),
            ];
            let back = succeeds(&jb(&w, args));
            assert_eq!(back.lines().count(), 1, "{back}");
            assert!(back.contains(&format!("of type {uri} ")), "{back}");
            let subject = format!("subject {}/attested/built@{digest}", reg.host());
            assert!(back.contains(&subject), "{back}");
        }
    }

    // verify: the attached provenance gives PORT=8080.
    let verify = |image: &str, key: Option<&Path>| {
        let mut c = jbuild(&w);
        c.args(["verify", image, "--context"]).arg(&ctx);
        if let Some(k) = key {
            c.arg("--key").arg(k);
        }
        run_bounded(&mut c, LIMIT)
    };
    let remote = format!("docker://{image}");
    let same = succeeds(&verify(&remote, Some(&public)));
    assert!(same.contains(&digest), "{same}");
    succeeds(&verify(&name, None));
    fails_with(
        &verify(&remote, Some(&home.join("other.pub"))),
        1,
        "no signature in the envelope is the key's",
    );
    // The same image without its provenance: the default PORT rebuilds
    // to another digest.
    let bare = World::new(512);
    let args = [
        OsStr::new("build"),
        "-t".as_ref(),
        "bare:1".as_ref(),
        "--build-arg".as_ref(),
        "PORT=8080".as_ref(),
        ctx.as_os_str(),
    ];
    succeeds(&jb(&bare, args));
    fails_with(
        &run_bounded(
            jbuild(&bare)
                .args(["verify", "bare:1", "--context"])
                .arg(&ctx),
            LIMIT,
        ),
        1,
        "differs",
    );
    // With --key, an image with no provenance attached is refused.
    fails_with(
        &run_bounded(
            jbuild(&bare)
                .args(["verify", "bare:1", "--context"])
                .arg(&ctx)
                .arg("--key")
                .arg(&public),
            LIMIT,
        ),
        1,
        "has no attestations",
    );
}

/// What `build --provenance`, `--sbom` and `--sign-with` refuse, before
/// building: each exit 1, saying what to do.
#[test]
fn attesting_flags_refuse_what_they_cannot_do() {
    let w = World::new(512);
    let home = w.tmp.path();
    jb_keys(&w, &home.join("k"));
    let ctx = arg_context(home);
    let key = home.join("k.key");
    let build = |extra: &[&OsStr]| {
        let mut c = jbuild(&w);
        c.arg("build").args(extra).arg(&ctx);
        run_bounded(&mut c, LIMIT)
    };
    let o = OsStr::new;
    fails_with(
        &build(&[o("-t"), o("a:1"), o("--sign-with"), key.as_os_str()]),
        1,
        "neither was given",
    );
    fails_with(
        &build(&[o("--sbom"), o("--sign-with"), key.as_os_str()]),
        1,
        "add -t NAME[:TAG]",
    );
    fails_with(
        &build(&[
            o("-t"),
            o("a:1"),
            o("--manifest"),
            o("list:1"),
            o("--provenance"),
        ]),
        1,
        "build each platform on its own to attest it",
    );
    fails_with(
        &run_bounded(
            jbuild(&w)
                .env("COSIGN_PASSWORD", "wrong-8d1")
                .args(["build", "-t", "a:1", "--provenance", "--sign-with"])
                .arg(&key)
                .arg(&ctx),
            LIMIT,
        ),
        1,
        "the password does not open the key",
    );
    let images = succeeds(&jb(&w, ["images"]));
    assert!(
        !images.lines().any(|l| l.starts_with("a ")),
        "a build ran:\n{images}"
    );
}

/// `build --provenance --sbom` without a key: both attestations travel
/// with the image `jbuild push` pushes, unsigned; cosign finds them (`download
/// attestation`) and its `verify-attestation` refuses them, as `jbuild
/// verify --key` does, while `jbuild verify` without a key takes the build
/// argument from the unsigned provenance and rebuilds to the same digest.
#[test]
fn unsigned_attestations_serve_verify_and_no_verifier() {
    let reg = Registry::start();
    let w = World::new(512);
    let home = w.tmp.path();
    jb_keys(&w, &home.join("k"));
    let ctx = arg_context(home);
    let name = format!("{}/attested/unsigned:1", reg.host());
    let args = [
        OsStr::new("--json"),
        "build".as_ref(),
        "-t".as_ref(),
        name.as_ref(),
        "--build-arg".as_ref(),
        "PORT=8080".as_ref(),
        "--provenance".as_ref(),
        "--sbom".as_ref(),
        ctx.as_os_str(),
    ];
    let out = succeeds(&jb(&w, args));
    let result: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let digest = result["manifest"].as_str().unwrap().to_string();
    let image = format!("{}/attested/unsigned@{digest}", reg.host());
    // `jbuild push` carries them (`build --push` does below).
    succeeds(&jb(&w, ["push", name.as_str()]));

    let downloaded = succeeds(&run_bounded(
        cosign(home).args([
            "download",
            "attestation",
            "--allow-http-registry=true",
            &image,
        ]),
        LIMIT,
    ));
    let envelopes: Vec<serde_json::Value> = downloaded
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(envelopes.len(), 2, "{downloaded}");
    assert!(
        envelopes
            .iter()
            .all(|e| e["signatures"].as_array().is_some_and(|s| s.is_empty())),
        "{downloaded}"
    );
    // No pkg database in this image: the image and no package.
    let sbom = statements_of(&downloaded)
        .into_iter()
        .find(|s| s["predicateType"] == "https://spdx.dev/Document")
        .unwrap();
    assert_eq!(spdx_ids(&sbom), ["SPDXRef-Image"], "{sbom}");
    let mut types: Vec<String> = statements_of(&downloaded)
        .iter()
        .map(|s| s["predicateType"].as_str().unwrap().to_string())
        .collect();
    types.sort();
    assert_eq!(
        types,
        [
            "https://slsa.dev/provenance/v0.2",
            "https://spdx.dev/Document"
        ]
    );
    let public = home.join("k.pub");
    let c = cosign_verify_attestation(home, &public, "slsaprovenance", &image);
    assert!(
        !c.status.success(),
        "cosign accepted an unsigned provenance"
    );

    let verify = |key: Option<&Path>| {
        let mut c = jbuild(&w);
        c.args(["verify", &format!("docker://{image}"), "--context"])
            .arg(&ctx);
        if let Some(k) = key {
            c.arg("--key").arg(k);
        }
        run_bounded(&mut c, LIMIT)
    };
    let same = succeeds(&verify(None));
    assert!(same.contains(&digest), "{same}");
    fails_with(
        &verify(Some(&public)),
        1,
        "no signature in the envelope is the key's",
    );

    // Built again with --sign-with: the signed one joins the unsigned one,
    // and cosign accepts the image for it.
    let key = home.join("k.key");
    let args = [
        OsStr::new("build"),
        "-t".as_ref(),
        name.as_ref(),
        "--build-arg".as_ref(),
        "PORT=8080".as_ref(),
        "--provenance".as_ref(),
        "--sign-with".as_ref(),
        key.as_os_str(),
        "--push".as_ref(),
        ctx.as_os_str(),
    ];
    succeeds(&jb(&w, args));
    let slsa = succeeds(&cosign_verify_attestation(
        home,
        &public,
        "slsaprovenance",
        &image,
    ));
    assert_eq!(statements_of(&slsa).len(), 1, "{slsa}");
    succeeds(&verify(Some(&public)));
}
