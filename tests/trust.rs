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

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use registry_support::{fails_with, run_bounded, succeeds, text, Registry, World, LIMIT};

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

/// The store's `app:1` pushed to `reg` as `repo:1`; returns `host/repo@digest`.
fn pushed(w: &World, reg: &Registry, repo: &str) -> String {
    let dest = format!("{}/{repo}:1", reg.host());
    succeeds(&run_bounded(
        jbuild(w).args(["push", "app:1", &dest]),
        LIMIT,
    ));
    format!("{}/{repo}@{}", reg.host(), w.manifest)
}

fn http() -> reqwest::blocking::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
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
    let out = succeeds(&run_bounded(
        jbuild(&w)
            .args(["generate-key-pair", "--output-key-prefix"])
            .arg(home.join("jb")),
        LIMIT,
    ));
    assert!(out.contains("jb.key") && out.contains("jb.pub"), "{out}");
    let (key, public) = (home.join("jb.key"), home.join("jb.pub"));
    let image = pushed(&w, &reg, "signed/app");

    let signed = succeeds(&run_bounded(
        jbuild(&w)
            .args(["sign", "--key"])
            .arg(&key)
            .arg(format!("docker://{image}")),
        LIMIT,
    ));
    assert!(signed.contains(&sig_tag(&w.manifest)), "{signed}");
    succeeds(&cosign_verify(home, &public, &image));
    let ours = succeeds(&run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(&public)
            .arg(format!("docker://{image}")),
        LIMIT,
    ));
    assert!(ours.contains(&w.manifest), "{ours}");

    // Tampered: the signature's base64 changed in one place.
    let tag = sig_tag(&w.manifest);
    let genuine = get_manifest(&reg, "signed/app", &tag);
    let mut bad = genuine.clone();
    let sig = bad["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"]
        .as_str()
        .unwrap()
        .to_string();
    let mut chars: Vec<char> = sig.chars().collect();
    chars[20] = if chars[20] == 'A' { 'B' } else { 'A' };
    bad["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"] =
        chars.into_iter().collect::<String>().into();
    put_manifest(&reg, "signed/app", &tag, &bad);
    let c = cosign_verify(home, &public, &image);
    assert!(!c.status.success(), "cosign accepted a tampered signature");
    let j = run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(&public)
            .arg(format!("docker://{image}")),
        LIMIT,
    );
    fails_with(&j, 1, "is not the key's signature of its payload");

    // Moved: a genuine signature of another image, put under this one's tag.
    let other = World::new(2048);
    let other_image = pushed(&other, &reg, "signed/other");
    succeeds(&run_bounded(
        jbuild(&other)
            .args(["sign", "--key"])
            .arg(&key)
            .arg(format!("docker://{other_image}")),
        LIMIT,
    ));
    let moved = get_manifest(&reg, "signed/other", &sig_tag(&other.manifest));
    // The blobs it names must be in this repository too.
    succeeds(&run_bounded(
        jbuild(&other).args(["push", "app:1", &format!("{}/signed/app:other", reg.host())]),
        LIMIT,
    ));
    let payload_blob = moved["layers"][0]["digest"].as_str().unwrap().to_string();
    let config_blob = moved["config"]["digest"].as_str().unwrap().to_string();
    for blob in [&payload_blob, &config_blob] {
        let r = http()
            .post(format!(
                "http://{}/v2/signed/app/blobs/uploads/?mount={blob}&from=signed/other",
                reg.host()
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
    let j = run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(&public)
            .arg(format!("docker://{image}")),
        LIMIT,
    );
    fails_with(&j, 1, &format!("not for the image's digest {}", w.manifest));

    // And an image with no signature at all.
    let j = run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(&public)
            .arg(format!("docker://{}/signed/app:other", reg.host())),
        LIMIT,
    );
    fails_with(&j, 1, "has no signatures");
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
    succeeds(&cosign_sign(home, &key, &image));
    let ours = succeeds(&run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(&public)
            .arg(format!("docker://{image}")),
        LIMIT,
    ));
    assert!(ours.contains(&w.manifest), "{ours}");

    // A key jbuild made verifies nothing cosign signed with its own.
    succeeds(&run_bounded(
        jbuild(&w)
            .args(["generate-key-pair", "--output-key-prefix"])
            .arg(home.join("jb")),
        LIMIT,
    ));
    let j = run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(home.join("jb.pub"))
            .arg(format!("docker://{image}")),
        LIMIT,
    );
    fails_with(&j, 1, "is not the key's signature");

    // jbuild signs with cosign's key; jbuild's key signs for cosign.
    let signed = succeeds(&run_bounded(
        jbuild(&w)
            .args(["sign", "--key"])
            .arg(&key)
            .arg(format!("docker://{image}")),
        LIMIT,
    ));
    assert!(signed.contains("2 signature(s)"), "{signed}");
    succeeds(&run_bounded(
        jbuild(&w)
            .args(["sign", "--key"])
            .arg(home.join("jb.key"))
            .arg(format!("docker://{image}")),
        LIMIT,
    ));
    succeeds(&cosign_verify(home, &home.join("jb.pub"), &image));
    succeeds(&cosign_verify(home, &public, &image));

    // cosign signs with a key jbuild made.
    let w2 = World::new(1024);
    let image2 = pushed(&w2, &reg, "cosigned/two");
    succeeds(&cosign_sign(home, &home.join("jb.key"), &image2));
    succeeds(&run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(home.join("jb.pub"))
            .arg(format!("docker://{image2}")),
        LIMIT,
    ));
}

/// A signature made in the store is kept beside the image (not listed as
/// an image), verifies there, and `jbuild push` takes it to the registry,
/// where cosign accepts it.
#[test]
fn a_store_signature_travels_with_push() {
    let reg = Registry::start();
    let w = World::new(4096);
    let home = w.tmp.path();
    succeeds(&run_bounded(
        jbuild(&w)
            .args(["generate-key-pair", "--output-key-prefix"])
            .arg(home.join("k")),
        LIMIT,
    ));
    succeeds(&run_bounded(
        jbuild(&w)
            .args(["sign", "--key"])
            .arg(home.join("k.key"))
            .arg("app:1"),
        LIMIT,
    ));
    let images = succeeds(&run_bounded(jbuild(&w).args(["images"]), LIMIT));
    assert!(!images.contains(".sig"), "{images}");
    assert_eq!(images.lines().count(), 2, "{images}");
    succeeds(&run_bounded(
        jbuild(&w)
            .args(["verify-signature", "--key"])
            .arg(home.join("k.pub"))
            .arg("app:1"),
        LIMIT,
    ));
    succeeds(&run_bounded(jbuild(&w).args(["check"]), LIMIT));
    let image = pushed(&w, &reg, "carried/app");
    succeeds(&cosign_verify(home, &home.join("k.pub"), &image));
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
    let ours = succeeds(&run_bounded(
        jbuild(&w)
            .args(["verify-attestation", "--key"])
            .arg(&public)
            .args(["--type", "slsaprovenance"])
            .arg(format!("docker://{image}")),
        LIMIT,
    ));
    assert!(ours.contains("https://slsa.dev/provenance/v0.2"), "{ours}");
    let j = run_bounded(
        jbuild(&w)
            .args(["verify-attestation", "--key"])
            .arg(&public)
            .args(["--type", "slsaprovenance1"])
            .arg(format!("docker://{image}")),
        LIMIT,
    );
    fails_with(&j, 1, "not https://slsa.dev/provenance/v1");

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
        &signing,
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
/// password is wrong.
#[test]
fn keys_and_passwords_never_reach_any_output() {
    let reg = Registry::start();
    let w = World::new(1024);
    let home = w.tmp.path();
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
        .arg(home.join("k.key"))
        .arg(format!("docker://{image}"))));
    succeeds(&run(jbuild(&w)
        .args(["sign", "--key"])
        .arg(home.join("k.key"))
        .arg("app:1")));
    let wrong = run(jbuild(&w)
        .env("COSIGN_PASSWORD", "not-the-password-91b2")
        .args(["sign", "--key"])
        .arg(home.join("k.key"))
        .arg("app:1"));
    fails_with(&wrong, 1, "the password does not open the key");
    let none = run(jbuild(&w)
        .env_remove("COSIGN_PASSWORD")
        .args(["sign", "--key"])
        .arg(home.join("k.key"))
        .arg("app:1"));
    fails_with(&none, 1, "set COSIGN_PASSWORD");

    let key_pem = std::fs::read_to_string(home.join("k.key")).unwrap();
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
