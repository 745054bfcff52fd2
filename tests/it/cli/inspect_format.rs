//! `jbuild inspect --format TEMPLATE`: the fields `images --format` knows,
//! the same for one image as `images` prints them, and the config's
//! fields (`{{.Config.Env}}` or `{{.Env}}`), each compared with the
//! config `jbuild inspect` prints as JSON.

use crate::support::common::{jbuild, ok, run};

use std::fs;

use serde_json::{json, Value};

#[test]
fn inspect_format_prints_the_image_fields_and_the_configs() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("a"), "a\n").unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nCOPY a /a\nENV A=1 B=\"two words\"\nWORKDIR /srv\nUSER www\n\
         LABEL tier=web\nEXPOSE 80 53/udp\nVOLUME /data\nSTOPSIGNAL SIGTERM\n\
         ENTRYPOINT [\"/bin/tini\", \"--\"]\nCMD [\"serve\", \"-p\", \"80\"]\n",
    )
    .unwrap();
    ok(jbuild(&root).args(["build", "-q", "-t", "web:1"]).arg(&ctx));

    // The fields of `images --format`, as `images` prints them.
    let fields = "{{.Repository}}|{{.Tag}}|{{.ID}}|{{.Digest}}|{{.Created}}|{{.Platform}}|{{.Size}}|{{.CompressedSize}}";
    let listed = ok(jbuild(&root).args(["images", "--format", fields]));
    let shown = ok(jbuild(&root).args(["inspect", "--format", fields, "web:1"]));
    assert_eq!(shown, listed);

    // The config's, against the config `inspect` prints.
    let v: Value = serde_json::from_str(&ok(jbuild(&root).args(["inspect", "web:1"]))).unwrap();
    let c = &v["config"]["config"];
    let one = |template: &str| {
        let out = ok(jbuild(&root).args(["inspect", "--format", template, "web:1"]));
        out.strip_suffix('\n').unwrap().to_string()
    };
    let as_json = |template: &str| -> Value { serde_json::from_str(&one(template)).unwrap() };
    assert_eq!(as_json("{{.Config.Env}}"), c["Env"]);
    assert_eq!(as_json("{{.Env}}"), c["Env"]);
    assert_eq!(as_json("{{.Config.Entrypoint}}"), c["Entrypoint"]);
    assert_eq!(as_json("{{.Config.Cmd}}"), c["Cmd"]);
    assert_eq!(as_json("{{.Config.Labels}}"), c["Labels"]);
    let keys =
        |o: &Value| -> Value { json!(o.as_object().unwrap().keys().cloned().collect::<Vec<_>>()) };
    assert_eq!(
        as_json("{{.Config.ExposedPorts}}"),
        keys(&c["ExposedPorts"])
    );
    assert_eq!(as_json("{{.Config.Volumes}}"), keys(&c["Volumes"]));
    assert_eq!(
        one("{{.Config.WorkingDir}}"),
        c["WorkingDir"].as_str().unwrap()
    );
    assert_eq!(one("{{.User}}"), c["User"].as_str().unwrap());
    assert_eq!(one("{{.StopSignal}}"), c["StopSignal"].as_str().unwrap());
    assert_eq!(
        one("{{.Os}}/{{.Architecture}}"),
        format!(
            "{}/{}",
            v["config"]["os"].as_str().unwrap(),
            v["config"]["architecture"].as_str().unwrap()
        )
    );
    assert_eq!(one("{{.Config.Env}}"), r#"["A=1","B=two words"]"#);

    // A field of neither: refused, naming both kinds.
    let o = run(jbuild(&root).args(["inspect", "--format", "{{.Nope}}", "web:1"]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`{{.Nope}}` is not a field") && err.contains("{{.Config.Env}}"),
        "{err}"
    );
    let o = run(jbuild(&root).args(["inspect", "--format", "{{.Env}}", "docker://localhost:1/x"]));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format is for images in the store"));
}
