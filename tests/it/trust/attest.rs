//! Build attestations (docs/trust.md): `build --provenance --sbom` signed
//! with `--sign-with` (cosign verify-attestation accepts them) or unsigned
//! (for `jbuild verify` only), and the flags' refusals.

use super::*;

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
    db.execute_batch(include_str!("../../data/sbom/pkg-local-schema.sql"))
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
