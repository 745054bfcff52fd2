//! Names as docker resolves them, through the binary: a pulled image found
//! by its name, a short name, an ID prefix and its digest by every command;
//! an ambiguous prefix refused with its candidates; `rmi` of several names,
//! by ID, `-f`, an image a manifest list holds; and `images` with `-q`,
//! `--format`, each `--filter`, CREATED and both sizes.

use crate::support::common;
use crate::support::registry as registry_support;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

use common::{jbuild, ok, run};
use jbuild::digest::Digest;
use jbuild::store::{oci_digest, Store};
use oci_spec::image::{Descriptor, MediaType};
use registry_support::Registry;

/// Runs `c`, which must exit with `code`; its standard error.
fn fails(c: &mut Command, code: i32) -> String {
    let out: Output = run(c);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{c:?}: stdout {} stderr {err}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

/// Builds `FROM scratch` + a file + `labels` as `tag` (created at `epoch`);
/// returns the image ID (`--iidfile`).
fn build(root: &Path, tag: &str, content: &str, epoch: u64, labels: &[&str]) -> String {
    let ctx = tempfile::tempdir().unwrap();
    fs::write(ctx.path().join("motd"), content).unwrap();
    fs::write(
        ctx.path().join("Jailfile"),
        "FROM scratch\nCOPY motd /etc/motd\n",
    )
    .unwrap();
    let iid = ctx.path().join("iid");
    let mut c = jbuild(root);
    c.env("SOURCE_DATE_EPOCH", epoch.to_string())
        .args(["build", "-q", "-t", tag, "--iidfile"])
        .arg(&iid);
    for l in labels {
        c.args(["--label", l]);
    }
    ok(c.arg(ctx.path()));
    fs::read_to_string(iid).unwrap().trim().to_string()
}

fn inspect_digest(root: &Path, what: &str) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&ok(jbuild(root).args(["inspect", what]))).unwrap();
    v["digest"].as_str().unwrap().to_string()
}

fn create(root: &Path, image: &str, jail: &str, dir: &Path) {
    ok(jbuild(root)
        .args(["create", image, jail, "--path"])
        .arg(dir.join(jail))
        .arg("--conf")
        .arg(dir.join(format!("{jail}.conf"))));
    assert_eq!(
        fs::read_to_string(dir.join(jail).join("etc/motd")).unwrap(),
        "pulled"
    );
}

#[test]
fn a_pulled_image_is_found_by_name_short_name_id_prefix_and_digest() {
    let reg = Registry::start();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let name = format!("{}/jails/app:1", reg.host());
    let id = build(a.path(), &name, "pulled", 0, &[]);
    ok(jbuild(a.path()).args(["push", &name]));
    let pulled = ok(jbuild(b.path()).args(["pull", &name]));
    assert_eq!(pulled.trim(), id);
    let b = b.path();
    let hex = id.strip_prefix("sha256:").unwrap();
    let jails = tempfile::tempdir().unwrap();

    // `host/…` finds itself; an ID prefix and the digest find the image.
    for what in [&name, &hex[..12], &hex[..6], &id, &format!("{name}@{id}")] {
        assert_eq!(inspect_digest(b, what), id, "{what}");
    }
    ok(jbuild(b).args(["history", &hex[..12]]));
    create(b, &hex[..12], "byid", jails.path());

    // A short name as docker resolves it: `alpine` is docker.io/library/alpine:latest.
    ok(jbuild(b).args(["tag", &hex[..8], "docker.io/library/alpine:latest"]));
    for what in [
        "alpine",
        "alpine:latest",
        "library/alpine",
        "docker.io/alpine",
    ] {
        assert_eq!(inspect_digest(b, what), id, "{what}");
    }
    create(b, "alpine", "byname", jails.path());
    let out = tempfile::tempdir().unwrap();
    let layout = format!("oci:{}", out.path().join("l").display());
    ok(jbuild(b).args(["export", "alpine", &layout]));
    ok(jbuild(b).args(["push", "alpine", &format!("{}/mirror/alpine:1", reg.host())]));

    // By ID, an image with two names is refused (docker's "must be forced").
    let err = fails(jbuild(b).args(["rmi", &hex[..12]]), 1);
    assert!(
        err.contains("several names")
            && err.contains("docker.io/library/alpine:latest")
            && err.contains(&name)
            && err.contains("rmi -f"),
        "{err}"
    );
    // By short name: that one name goes, the image keeps the other.
    let removed = ok(jbuild(b).args(["rmi", "alpine"]));
    assert!(
        removed.contains("untagged docker.io/library/alpine:latest"),
        "{removed}"
    );
    fails(jbuild(b).args(["inspect", "alpine"]), 1);
    assert_eq!(inspect_digest(b, &hex[..12]), id);
    // By digest: its last name goes.
    let removed = ok(jbuild(b).args(["rmi", &id]));
    assert!(removed.contains(&format!("untagged {name}")), "{removed}");
    assert_eq!(ok(jbuild(b).args(["images", "-q"])), "");
    let err = fails(jbuild(b).args(["inspect", &hex[..12]]), 1);
    assert!(
        err.contains("no image") && err.contains("jbuild images"),
        "{err}"
    );
}

#[test]
fn rmi_takes_several_names_force_and_says_when_a_list_holds_the_image() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let one = build(r, "one:1", "one", 0, &[]);
    build(r, "two:1", "two", 0, &[]);
    ok(jbuild(r).args(["tag", "one:1", "one:alias"]));
    ok(jbuild(r).args(["tag", "one:1", "one:third"]));

    // Several names at once; one that is missing fails alone, the others go.
    let out = run(jbuild(r).args(["rmi", "two:1", "nope", "one:third"]));
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("untagged two:1") && said.contains("untagged one:third"),
        "{said}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("no image `nope`"));

    // -f by ID takes every name.
    let hex = &one["sha256:".len()..];
    let removed = ok(jbuild(r).args(["rmi", "-f", &hex[..10]]));
    assert!(
        removed.contains("untagged one:1") && removed.contains("untagged one:alias"),
        "{removed}"
    );
    assert_eq!(ok(jbuild(r).args(["images", "-q"])), "");

    // An image a manifest list holds keeps its last name unless forced.
    build(r, "amd:1", "amd", 0, &[]);
    ok(jbuild(r).args(["manifest", "create", "multi:1", "amd:1"]));
    let err = fails(jbuild(r).args(["rmi", "amd:1"]), 1);
    assert!(
        err.contains("manifest list `multi:1`") && err.contains("-f"),
        "{err}"
    );
    ok(jbuild(r).args(["rmi", "-f", "amd:1"]));
    ok(jbuild(r).args(["inspect", "multi:1"]));
}

#[test]
fn an_ambiguous_prefix_or_name_is_refused_listing_the_candidates() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    build(r, "web:latest", "short", 0, &[]);
    build(r, "docker.io/library/web:latest", "long", 0, &[]);
    // `web` is exactly `web:latest`; `library/web` is both names.
    ok(jbuild(r).args(["inspect", "web"]));
    let err = fails(jbuild(r).args(["inspect", "library/web"]), 1);
    assert!(
        err.contains("more than one image")
            && err.contains("web:latest (sha256:")
            && err.contains("docker.io/library/web:latest (sha256:"),
        "{err}"
    );

    // Two entries whose digests share their first 6 hex digits.
    let store = Store::open(&r.join("store")).unwrap();
    let mut seen = std::collections::HashMap::new();
    let (x, y) = (0u32..)
        .find_map(|i| {
            let d = Digest::of(&i.to_le_bytes());
            seen.insert(d.hex()[..6].to_string(), i).map(|j| (j, i))
        })
        .unwrap();
    let digest = |i: u32| Digest::of(&i.to_le_bytes());
    for (n, i) in [("x:1", x), ("y:1", y)] {
        let d = Descriptor::new(MediaType::ImageManifest, 1, oci_digest(&digest(i)));
        store.tag_ref(n, &d).unwrap();
    }
    let prefix = digest(x).hex()[..6].to_string();
    for cmd in ["inspect", "rmi", "history"] {
        let err = fails(jbuild(r).args([cmd, &prefix]), 1);
        assert!(
            err.contains("more than one image")
                && err.contains(&format!("{} (x:1)", digest(x)))
                && err.contains(&format!("{} (y:1)", digest(y))),
            "{cmd}: {err}"
        );
    }
}

#[test]
fn images_quiet_format_filters_created_and_both_sizes() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let day = 86_400;
    let old = build(r, "old:1", "old", 1_600_000_000, &["tier=db"]);
    let mid = build(
        r,
        "web:1",
        &"x".repeat(100_000),
        1_600_000_000 + day,
        &["tier=web"],
    );
    let new = build(
        r,
        "localhost/web:2",
        "new",
        1_600_000_000 + 2 * day,
        &["tier=web", "edge=yes"],
    );
    let gone = build(r, "gone:1", "dangling", 1_600_000_000 + 3 * day, &[]);
    ok(jbuild(r).args(["rmi", "gone:1"]));
    // It stays in the store without a name, as an import without one leaves it.
    let store = Store::open(&r.join("store")).unwrap();
    let gone_digest: Digest = gone.parse().unwrap();
    let size = fs::metadata(store.blob_path(&gone_digest)).unwrap().len();
    let desc = Descriptor::new(MediaType::ImageManifest, size, oci_digest(&gone_digest));
    store.add_untagged(&desc).unwrap();

    let short = |id: &str| id["sha256:".len().."sha256:".len() + 12].to_string();
    let lines = |args: &[&str]| -> Vec<String> {
        ok(jbuild(r).arg("images").args(args))
            .lines()
            .map(str::to_string)
            .collect()
    };

    // -q: IDs only, one per entry (index order: names, then unnamed).
    assert_eq!(
        lines(&["-q"]),
        vec![short(&new), short(&old), short(&mid), short(&gone)]
    );
    assert_eq!(lines(&["-q", "--no-trunc"])[0], new);
    // As docker: -q wins over --format, and the global spelling is the same flag.
    assert_eq!(lines(&["-q", "--format", "{{.Tag}}"]), lines(&["-q"]));
    let global = ok(jbuild(r).args(["-q", "images"]));
    assert_eq!(global.lines().count(), 4, "{global}");

    // The table: CREATED as docker says it, the unpacked size beside the compressed one.
    let table = lines(&[]);
    assert!(
        table[0].contains("CREATED")
            && table[0].contains("SIZE")
            && table[0].contains("COMPRESSED"),
        "{table:?}"
    );
    assert!(
        table
            .iter()
            .any(|l| l.contains("web:1") && l.contains("years ago")),
        "{table:?}"
    );

    // --format: fields, and sizes that are what they say.
    let web = lines(&["--format", "{{.Repository}}|{{.Tag}}|{{.ID}}|{{.Digest}}|{{.Created}}|{{.Platform}}|{{.Size}}|{{.CompressedSize}}", "--filter", "reference=web"]);
    let f: Vec<&str> = web[0].split('|').collect();
    assert_eq!(
        &f[..6],
        [
            "web",
            "1",
            &short(&mid),
            &mid,
            "2020-09-14T12:26:40Z",
            "freebsd/amd64"
        ]
        .as_slice(),
        "{web:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(jbuild(r).args([
        "--json",
        "images",
        "--filter",
        "reference=web",
    ])))
    .unwrap();
    let (unpacked, compressed) = (
        v[0]["unpacked_size"].as_u64().unwrap(),
        v[0]["size"].as_u64().unwrap(),
    );
    // 100 000 bytes of `x`: the tar holds them whole, gzip squeezes them.
    assert!(unpacked > 100_000 && unpacked < 110_000, "{unpacked}");
    assert!(compressed < 10_000, "{compressed}");
    assert_eq!(f[6], jbuild::report::plain::bytes(unpacked));
    assert_eq!(f[7], jbuild::report::plain::bytes(compressed));
    let json: serde_json::Value =
        serde_json::from_str(&lines(&["--format", "json", "-f", "reference=old"])[0]).unwrap();
    assert_eq!(json["Repository"], "old");
    assert_eq!(json["ID"], short(&old));
    let table = lines(&[
        "--format",
        "table {{.Repository}}\\t{{.Tag}}",
        "-f",
        "reference=old",
    ]);
    assert_eq!(table, vec!["REPOSITORY   TAG", "old          1"]);

    // Each filter; one key twice is either, two keys are both.
    let ids = |filters: &[&str]| -> Vec<String> {
        let mut args = vec!["-q", "--no-trunc"];
        for f in filters {
            args.extend(["--filter", f]);
        }
        lines(&args)
    };
    assert_eq!(ids(&["reference=web"]), vec![mid.clone()]);
    assert_eq!(ids(&["reference=*/web:*"]), vec![new.clone()]);
    // `*` stops at `/`, as docker's path.Match.
    assert_eq!(ids(&["reference=*web*"]), vec![mid.clone()]);
    assert_eq!(
        ids(&["reference=old", "reference=web:1"]),
        vec![old.clone(), mid.clone()]
    );
    assert_eq!(ids(&["label=tier=web"]), vec![new.clone(), mid.clone()]);
    assert_eq!(ids(&["label=edge"]), vec![new.clone()]);
    assert_eq!(ids(&["label=tier=web", "reference=web"]), vec![mid.clone()]);
    assert_eq!(ids(&["dangling=true"]), vec![gone.clone()]);
    assert_eq!(ids(&["dangling=false"]).len(), 3);
    assert_eq!(ids(&["before=web:1"]), vec![old.clone()]);
    assert_eq!(ids(&["since=web:1"]), vec![new.clone(), gone.clone()]);
    assert_eq!(
        ids(&["since=old:1", "before=localhost/web:2"]),
        vec![mid.clone()]
    );

    // Bad input is the user's, and says what is accepted.
    let err = fails(jbuild(r).args(["images", "--filter", "colour=red"]), 1);
    assert!(
        err.contains("reference, label, dangling, before, since"),
        "{err}"
    );
    let err = fails(jbuild(r).args(["images", "--format", "{{.Nope}}"]), 1);
    assert!(err.contains("{{.Repository}}"), "{err}");
    let err = fails(jbuild(r).args(["images", "--filter", "before=missing"]), 1);
    assert!(err.contains("no image `missing`"), "{err}");

    // rmi of an image kept without a name removes the entry that kept it.
    let removed = ok(jbuild(r).args(["rmi", &short(&gone)]));
    assert!(
        removed.contains(&format!("removed unnamed image {gone}")),
        "{removed}"
    );
    assert_eq!(ids(&["dangling=true"]), Vec::<String>::new());
}
