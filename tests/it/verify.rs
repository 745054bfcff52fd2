//! `jbuild verify` and `build --provenance-file` through the `jbuild`
//! binary: a native-only image rebuilds to the same digest from the recipe
//! it carries; an edited context file is named with its layer and step;
//! the provenance gives the build arguments, the target and the base
//! digest; the provenance holds the build's facts and no secret, and two
//! builds give the same bytes. A RUN-based image over busybox-static
//! rebuilds to the same digest too, and so does an image with `ADD` of a
//! URL and of a git repository.

use crate::support::common;
use crate::support::registry as registry_support;

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::origins::{file_server, git_repo};
use common::*;
use registry_support::Registry;

const EPOCH: &str = "1700000000";

fn write(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        fs::write(dir.join(name), text).unwrap();
    }
    dir.to_path_buf()
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts that `jbuild verify` succeeded, saying so for `image`.
fn verified(out: &std::process::Output, image: &str) {
    let (stdout, stderr) = (stdout_of(out), stderr_of(out));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!("verified: {image} rebuilt")),
        "{stdout}"
    );
}

const NATIVE: &str = "FROM scratch\n\
ARG GREETING=hello\n\
LABEL org.example.team=web\n\
COPY a.txt /etc/a.txt\n\
SYSRC sshd_enable=YES\n\
LINE_IN_FILE \"greeting=${GREETING}\" /etc/greet.conf\n\
COPY b.conf /usr/local/etc/b.conf\n\
CMD [\"/bin/sh\"]\n";

#[test]
fn a_native_image_rebuilds_to_its_digest_and_an_edited_file_is_named() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = write(
        &t.path().join("ctx"),
        &[
            ("Jailfile", NATIVE),
            ("a.txt", "one\n"),
            ("b.conf", "port=80\n"),
        ],
    );
    // Facts the image carries: time, compression, a --label, an annotation.
    let built = ok(jbuild(&root)
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["-q", "build", "-t", "web:1", "--compression", "zstd"])
        .args([
            "--build-arg",
            "GREETING=howdy",
            "--label",
            "org.example.by=ci",
        ])
        .args(["--annotation", "org.example.note=x"])
        .arg(&ctx));
    let digest = built.trim().to_string();
    let index_before = fs::read(root.join("store/index.json")).unwrap();

    // The build argument is not in the image: it is given again.
    let verify = |json: bool| {
        let mut c = jbuild(&root);
        if json {
            c.arg("--json");
        }
        c.args([
            "verify",
            "web:1",
            "--build-arg",
            "GREETING=howdy",
            "--context",
        ])
        .arg(&ctx);
        c
    };
    let out = ok(&mut verify(false));
    assert!(
        out.contains(&format!(
            "verified: web:1 rebuilt to the same manifest {digest}"
        )),
        "{out}"
    );
    // Nothing of the rebuild stays: no image named, no scratch directory.
    assert_eq!(
        fs::read(root.join("store/index.json")).unwrap(),
        index_before
    );
    assert_eq!(fs::read_dir(root.join("tmp")).unwrap().count(), 0);

    // One context file edited: its layer (the fourth, 3), the step and the file.
    fs::write(ctx.join("b.conf"), "port=8080\n").unwrap();
    let out = run(&mut verify(false));
    let (stdout, stderr) = (stdout_of(&out), stderr_of(&out));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("first differing layer: 3, made by `COPY b.conf /usr/local/etc/b.conf`"),
        "{stdout}"
    );
    assert!(
        stdout.contains("first differing file: usr/local/etc/b.conf (content: 8 → 10 bytes)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("error: the rebuild of web:1 differs"),
        "{stderr}"
    );

    // --json: the same verdict as data.
    let out = run(&mut verify(true));
    assert_eq!(out.status.code(), Some(1));
    let v = json_result(&stdout_of(&out));
    assert_eq!(v["same"], false);
    assert_eq!(v["expected"], digest.as_str());
    assert_eq!(v["difference"]["kind"], "layer");
    assert_eq!(v["difference"]["index"], 3);
    assert_eq!(v["difference"]["file"]["path"], "usr/local/etc/b.conf");
    let diff_ids: Vec<&str> = ["expected", "rebuilt"]
        .iter()
        .map(|k| v["difference"][*k].as_str().unwrap())
        .collect();
    assert_ne!(diff_ids[0], diff_ids[1]);

    // A checkout under another umask: the mode of the file COPY took.
    fs::write(ctx.join("b.conf"), "port=80\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(ctx.join("a.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    fs::set_permissions(ctx.join("a.txt"), fs::Permissions::from_mode(0o664)).unwrap();
    let out = run(&mut verify(false));
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "first differing file: etc/a.txt (mode: {mode:04o} → 0664)"
        )),
        "{stdout}"
    );
    fs::set_permissions(ctx.join("a.txt"), fs::Permissions::from_mode(mode)).unwrap();

    // A build argument the image does not record: the layer it shaped.
    let out = run(jbuild(&root)
        .args(["verify", "web:1", "--context"])
        .arg(&ctx));
    let stdout = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("made by `LINE_IN_FILE \"greeting=howdy\" /etc/greet.conf`")
            && stdout.contains("first differing file: etc/greet.conf"),
        "{stdout}"
    );
}

#[test]
fn images_without_a_recipe_and_bad_input_are_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = write(
        &t.path().join("ctx"),
        &[("Jailfile", NATIVE), ("a.txt", "1"), ("b.conf", "2")],
    );
    ok(jbuild(&root).args(["-q", "build", "-t", "web:1"]).arg(&ctx));
    let out = run(jbuild(&root)
        .args(["verify", "nosuch:1", "--context"])
        .arg(&ctx));
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    // An image umoci made carries no Jailfile.
    let layout = t.path().join("layout");
    for args in [vec!["init", "--layout"], vec!["new", "--image"]] {
        let target = if args[0] == "init" {
            layout.display().to_string()
        } else {
            format!("{}:foreign", layout.display())
        };
        crate::support::lane::require(crate::support::lane::Lane::Umoci);
        let st = std::process::Command::new("umoci")
            .args(&args)
            .arg(target)
            .status()
            .unwrap();
        assert!(st.success(), "umoci {args:?}");
    }
    ok(jbuild(&root)
        .arg("import")
        .arg(format!("oci:{}:foreign", layout.display()))
        .arg("foreign:1"));
    let out = run(jbuild(&root)
        .args(["verify", "foreign:1", "--context"])
        .arg(&ctx));
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("carries no Jailfile (no label org.jbuild.jailfile)"),
        "{}",
        stderr_of(&out)
    );
    let out = run(jbuild(&root)
        .args([
            "verify",
            "web:1",
            "--provenance",
            "/nonexistent/prov.json",
            "--context",
        ])
        .arg(&ctx));
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("--provenance /nonexistent/prov.json"));
}

#[test]
fn the_provenance_gives_arguments_target_and_pins_the_base() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let base_ctx = write(
        &t.path().join("base"),
        &[
            (
                "Jailfile",
                "FROM scratch\nCOPY os-release /etc/os-release\n",
            ),
            ("os-release", "v1\n"),
        ],
    );
    ok(jbuild(&root)
        .args(["-q", "build", "-t", "base:1", "-t", "base:old"])
        .arg(&base_ctx));
    let ctx = write(
        &t.path().join("app"),
        &[
            (
                "Jailfile",
                "FROM base:1 AS app\nARG PORT=80\nCOPY app.conf /usr/local/etc/app.conf\n\
                 SYSRC app_port=${PORT}\n\
                 FROM scratch AS other\nCOPY app.conf /other\n",
            ),
            ("app.conf", "x=1\n"),
        ],
    );
    let prov = t.path().join("prov.json");
    ok(jbuild(&root)
        .args([
            "-q",
            "build",
            "-t",
            "app:1",
            "--target",
            "app",
            "--build-arg",
            "PORT=8080",
        ])
        .arg("--provenance-file")
        .arg(&prov)
        .arg(&ctx));
    let verify = |extra: &[&str]| {
        run(jbuild(&root)
            .args(["verify", "app:1", "--context"])
            .arg(&ctx)
            .args(extra))
    };
    let prov_arg = ["--provenance", prov.to_str().unwrap()];
    let out = verify(&prov_arg);
    verified(&out, "app:1");

    // base:1 moves on; base:old still names the manifest app:1 was built
    // from, and the rebuild uses that one (the digest the image records).
    fs::write(base_ctx.join("os-release"), "v2\n").unwrap();
    ok(jbuild(&root)
        .args(["-q", "build", "-t", "base:1"])
        .arg(&base_ctx));
    let out = verify(&prov_arg);
    verified(&out, "app:1");

    // Once no name holds it, the moved base is named as the reason.
    ok(jbuild(&root).args(["rmi", "base:old"]));
    let out = verify(&prov_arg);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("`base:1` in the store is sha256:")
            && err.contains("but the image was built from sha256:"),
        "{err}"
    );

    // A provenance of another Jailfile is refused.
    let mut other: serde_json::Value = serde_json::from_slice(&fs::read(&prov).unwrap()).unwrap();
    other["invocation"]["configSource"]["digest"]["sha256"] = "00".repeat(32).into();
    fs::write(&prov, other.to_string()).unwrap();
    let out = verify(&prov_arg);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("it is the provenance of another build"),
        "{}",
        stderr_of(&out)
    );
}

/// A state root with `bb:base`, busybox-static installed; its digest.
fn busybox_base(root: &Path, dir: &Path) -> String {
    // These tests run build steps.
    crate::support::lane::require(crate::support::lane::Lane::Root);
    crate::support::lane::require(crate::support::lane::Lane::Busybox);
    let bb = static_busybox().expect("the busybox lane found it");
    let ctx = dir.join("bb");
    fs::create_dir_all(&ctx).unwrap();
    fs::copy(bb, ctx.join("busybox")).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=linux/amd64 scratch\n\
         COPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n",
    )
    .unwrap();
    ok(jbuild(root)
        .args(["-q", "build", "-t", "bb:base"])
        .arg(&ctx))
    .trim()
    .to_string()
}

#[test]
fn provenance_holds_the_facts_and_no_secret_and_a_run_image_verifies() {
    let t = tempfile::tempdir().unwrap();
    let canary = format!(
        "CANARY-{}",
        fs::read_to_string("/proc/sys/kernel/random/uuid")
            .unwrap()
            .trim()
    );
    let secret = t.path().join("tok");
    fs::write(&secret, &canary).unwrap();
    let jailfile = "FROM bb:base\nARG FLAVOUR\n\
        RUN --mount=type=secret,id=tok test -s /run/secrets/tok && echo \"$FLAVOUR\" > /flavour\n\
        COPY app.conf /etc/app.conf\n";
    let ctx = write(
        &t.path().join("ctx"),
        &[("Jailfile", jailfile), ("app.conf", "a=1\n")],
    );
    let mut provs = Vec::new();
    let mut base = String::new();
    for n in 0..2 {
        let root = t.path().join(format!("root{n}"));
        base = busybox_base(&root, t.path());
        let prov = t.path().join(format!("prov{n}.json"));
        ok(jbuild(&root)
            .args(["-q", "build", "-t", "app:1", "--build-arg", "FLAVOUR=mint"])
            .arg("--secret")
            .arg(format!("id=tok,src={}", secret.display()))
            .arg("--provenance-file")
            .arg(&prov)
            .arg(&ctx));
        provs.push(fs::read_to_string(&prov).unwrap());
    }
    assert_eq!(provs[0], provs[1], "two builds, two provenances");
    let text = provs[0].clone();
    assert!(
        !text.contains(&canary),
        "the secret is in the provenance:\n{text}"
    );
    let p: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        p["builder"]["id"],
        format!(
            "https://example.invalid/jbuild@v{}",
            env!("CARGO_PKG_VERSION")
        )
    );
    assert!(p["buildType"]
        .as_str()
        .unwrap()
        .ends_with("/buildtypes/jailfile/v1"));
    let jailfile_sha = {
        use sha2::Digest;
        hex(&sha2::Sha256::digest(jailfile.as_bytes()))
    };
    let cs = &p["invocation"]["configSource"];
    assert_eq!(cs["digest"]["sha256"], jailfile_sha.as_str());
    assert_eq!(cs["entryPoint"], "Jailfile");
    let params = &p["invocation"]["parameters"];
    assert_eq!(params["buildArgs"], serde_json::json!({"FLAVOUR": "mint"}));
    assert_eq!(params["platform"], "linux/amd64");
    assert_eq!(params["target"], "0");
    let materials = p["materials"].as_array().unwrap();
    let base_hex = base.strip_prefix("sha256:").unwrap();
    assert!(
        materials
            .iter()
            .any(|m| m["uri"] == "docker://bb:base" && m["digest"]["sha256"] == base_hex),
        "{materials:?}"
    );
    assert!(materials.iter().any(|m| m["uri"] == "jbuild:context"
        && m["digest"]["sha256"]
            .as_str()
            .is_some_and(|h| h.len() == 64)));
    let steps = p["buildConfig"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(steps[0]["instruction"]
        .as_str()
        .unwrap()
        .starts_with("RUN --mount=type=secret,id=tok"));
    assert!(steps
        .iter()
        .all(|s| s["key"].as_str().unwrap().starts_with("sha256:")));
    // A RUN step read what jbuild cannot list.
    assert_eq!(p["metadata"]["reproducible"], false);
    assert_eq!(p["metadata"]["completeness"]["materials"], false);

    // The RUN-based image rebuilds to its digest, the argument from the
    // provenance; the step tests that its secret is there, so without
    // --secret the rebuild fails, saying so.
    let root = t.path().join("root1");
    let verify = |secret_arg: Option<String>| {
        run(jbuild(&root)
            .args(["verify", "app:1", "--context"])
            .arg(&ctx)
            .arg("--provenance")
            .arg(t.path().join("prov1.json"))
            .args(
                secret_arg
                    .map(|s| vec!["--secret".to_string(), s])
                    .unwrap_or_default(),
            ))
    };
    let out = verify(Some(format!("id=tok,src={}", secret.display())));
    verified(&out, "app:1");
    let out = verify(None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("rebuilding `app:1`"),
        "{}",
        stderr_of(&out)
    );
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn an_image_in_a_registry_verifies_on_another_machine_storing_nothing() {
    let reg = Registry::start();
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let base_ctx = write(
        &t.path().join("base"),
        &[
            ("Jailfile", "FROM scratch\nCOPY motd /etc/motd\n"),
            ("motd", "hi\n"),
        ],
    );
    let base = format!("{}/jails/base:1", reg.addr());
    ok(jbuild(&root)
        .args(["-q", "build", "-t", &base, "--push"])
        .arg(&base_ctx));
    let ctx = write(
        &t.path().join("app"),
        &[
            (
                "Jailfile",
                &format!("FROM {base}\nCOPY app.conf /etc/app.conf\n"),
            ),
            ("app.conf", "x=1\n"),
        ],
    );
    let app = format!("{}/jails/app:1", reg.addr());
    ok(jbuild(&root)
        .args(["-q", "build", "-t", &app, "--push"])
        .arg(&ctx));

    // Another machine: an empty root, the context and the registry. The
    // image and its base come from the registry into the scratch root.
    let other = t.path().join("other");
    let image = format!("docker://{app}");
    let out = run(jbuild(&other)
        .args(["verify", &image, "--context"])
        .arg(&ctx));
    verified(&out, &image);
    assert_eq!(ok(jbuild(&other).args(["images", "-q"])).trim(), "");
}

#[test]
fn an_image_with_url_and_git_adds_verifies() {
    let server = file_server(&[("/app.conf", b"listen 80\n")]);
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let repo = t.path().join("repo");
    git_repo(&repo, &[("app.txt", b"v1\n")]);
    let conf = format!("http://{}/app.conf", server.host());
    let ctx = write(
        &t.path().join("ctx"),
        &[(
            "Jailfile",
            &format!(
                "FROM scratch\n\
                 ADD file://{}#main /src/\n\
                 ADD {conf} /etc/app.conf\n",
                repo.display()
            ),
        )],
    );
    ok(jbuild(&root)
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .args(["-q", "build", "-t", "adds:1"])
        .arg(&ctx));
    let out = run(jbuild(&root)
        .args(["verify", "adds:1", "--context"])
        .arg(&ctx));
    verified(&out, "adds:1");
}
