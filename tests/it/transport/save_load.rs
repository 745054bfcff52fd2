//! `jbuild save` and `jbuild load`, docker's names for an archive out and
//! in: the archive a file (`-o`, `-i`) or the standard streams, skopeo
//! reading what `save` wrote (the same manifest digest, found by the
//! image's name), `load` naming the image as the archive names it.

use crate::support::common::{jbuild, ok, run};
use crate::support::lane::{self, Lane};

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

fn images(root: &Path) -> String {
    ok(jbuild(root).args(["images", "--format", "{{.Repository}}:{{.Tag}} {{.Digest}}"]))
}

#[test]
fn save_writes_an_archive_skopeo_reads_and_load_reads_it_back_by_name() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("a.txt"), "a\n").unwrap();
    fs::write(ctx.join("Jailfile"), "FROM scratch\nCOPY a.txt /a.txt\n").unwrap();
    ok(jbuild(&root).args(["build", "-q", "-t", "web:1"]).arg(&ctx));
    let listed = images(&root);
    assert!(listed.starts_with("web:1 sha256:"), "{listed}");
    let digest = listed.split_whitespace().nth(1).unwrap().to_string();

    // -o FILE, and standard output: the same bytes.
    let file = t.path().join("web.tar");
    let printed = ok(jbuild(&root)
        .args(["-q", "save", "-o"])
        .arg(&file)
        .arg("web:1"));
    assert_eq!(printed.trim(), digest);
    let out = Command::new(env!("CARGO_BIN_EXE_jbuild"))
        .env("JBUILD_ROOT", &root)
        .env("JBUILD_BACKEND", "dir")
        .args(["-q", "save", "web:1"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, fs::read(&file).unwrap());

    if lane::need(Lane::Skopeo) {
        let o = Command::new("skopeo")
            .args(["inspect", "--raw"])
            .arg(format!("oci-archive:{}", file.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let d = jbuild::digest::Digest::of(&o.stdout);
        assert_eq!(d.to_string(), digest, "skopeo reads the saved manifest");
        // By the name the archive carries.
        let o = Command::new("skopeo")
            .args(["inspect", "--raw"])
            .arg(format!("oci-archive:{}:web:1", file.display()))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    // -i FILE, and standard input: the image back under its name.
    let other = t.path().join("other");
    ok(jbuild(&other).args(["-q", "load", "-i"]).arg(&file));
    assert_eq!(images(&other), listed);
    let third = t.path().join("third");
    let o = jbuild(&third)
        .args(["-q", "load"])
        .stdin(fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(images(&third), listed);

    // An archive whose only image has a bare tag (export's): untagged.
    let exported = t.path().join("exported.tar");
    ok(jbuild(&root)
        .args(["-q", "export", "web:1"])
        .arg(format!("oci-archive:{}", exported.display())));
    let fourth = t.path().join("fourth");
    ok(jbuild(&fourth).args(["-q", "load", "-i"]).arg(&exported));
    let o = run(jbuild(&fourth).args(["images", "--format", "{{.Repository}} {{.Digest}}"]));
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains(&digest) && !shown.contains("web"), "{shown}");
}
