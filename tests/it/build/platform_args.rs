//! The build's platform in the recipe (issue 33 item 4), through the
//! `jbuild` binary: BuildKit's automatic arguments (`TARGETPLATFORM`,
//! `TARGETOS`, `TARGETARCH`, `TARGETVARIANT`, `BUILDPLATFORM`, `BUILDOS`,
//! `BUILDARCH`, `BUILDVARIANT`), global and in a stage once declared; and
//! `COPY --from=<image>` in a build for several platforms taking each
//! platform's files from an image index of two platforms made here.

use crate::support::common::*;
use crate::support::lane;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn write(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        fs::write(dir.join(name), text).unwrap();
    }
    dir.to_path_buf()
}

/// The image `image` exported and unpacked by umoci; its config and root.
fn unpacked(root: &Path, image: &str, work: &Path) -> (Value, PathBuf) {
    let (_, rootfs) = export_unpacked(root, image, work);
    let config: Value = serde_json::from_str(&ok(jbuild(root).args(["inspect", image]))).unwrap();
    (config["config"].clone(), rootfs)
}

#[test]
fn platform_arguments_are_predefined_and_declared_as_buildkit_does() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = write(
        &t.path().join("ctx"),
        &[
            (
                "Jailfile",
                "FROM --platform=$TARGETPLATFORM scratch\n\
                 ARG TARGETOS TARGETARCH TARGETPLATFORM TARGETVARIANT BUILDOS BUILDARCH\n\
                 COPY ${TARGETOS}-${TARGETARCH}.txt /t/\n\
                 LABEL target=$TARGETPLATFORM variant=x$TARGETVARIANT build=$BUILDOS/$BUILDARCH \
                 undeclared=${BUILDPLATFORM:-unset}\n",
            ),
            ("freebsd-arm64.txt", "arm64\n"),
            ("freebsd-amd64.txt", "amd64\n"),
        ],
    );
    let host_arch = jbuild::config::host_architecture();
    let build_platform = format!("{}/{host_arch}", std::env::consts::OS);
    for (platform, file, target, variant) in [
        (
            Some("freebsd/arm64/v8"),
            "t/freebsd-arm64.txt",
            "freebsd/arm64/v8",
            "xv8",
        ),
        (
            None,
            &*format!("t/freebsd-{host_arch}.txt"),
            &*format!("freebsd/{host_arch}"),
            "x",
        ),
    ] {
        let tag = format!("p:{}", if platform.is_some() { "arm" } else { "default" });
        let mut c = jbuild(&root);
        c.args(["build", "-t", &tag]);
        if let Some(p) = platform {
            c.args(["--platform", p]);
        }
        ok(c.arg(&ctx));
        let (config, rootfs) = unpacked(&root, &tag, t.path());
        assert!(rootfs.join(file).is_file(), "{tag}: no {file}");
        let labels = &config["config"]["Labels"];
        assert_eq!(labels["target"], target, "{tag}: {config}");
        assert_eq!(labels["variant"], variant, "{tag}");
        assert_eq!(labels["build"], build_platform.as_str(), "{tag}");
        // Not declared in the stage: not in scope there.
        assert_eq!(labels["undeclared"], "unset", "{tag}");
        assert_eq!(config["architecture"], target.split('/').nth(1).unwrap());
    }
}

#[test]
fn copy_from_an_image_takes_the_files_of_the_platform_being_built() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    // An image index of two platforms whose files differ.
    let base = write(
        &t.path().join("base"),
        &[
            ("amd64.Jailfile", "FROM scratch\nCOPY amd64.txt /arch.txt\n"),
            ("arm64.Jailfile", "FROM scratch\nCOPY arm64.txt /arch.txt\n"),
            ("amd64.txt", "made for amd64\n"),
            ("arm64.txt", "made for arm64\n"),
        ],
    );
    for arch in ["amd64", "arm64"] {
        ok(jbuild(&root)
            .args(["build", "--platform", &format!("freebsd/{arch}")])
            .args(["--manifest", "base:multi", "-f"])
            .arg(base.join(format!("{arch}.Jailfile")))
            .arg(&base));
    }
    let ctx = write(
        &t.path().join("ctx"),
        &[(
            "Jailfile",
            "FROM scratch\nCOPY --from=base:multi /arch.txt /got.txt\n",
        )],
    );
    let out = ok(jbuild(&root)
        .args([
            "--json",
            "build",
            "--platform",
            "freebsd/amd64,freebsd/arm64",
        ])
        .args(["--manifest", "out:multi"])
        .arg(&ctx));
    let result = json_result(&out);
    let images = result["images"].as_array().unwrap();
    assert_eq!(images.len(), 2, "{result}");
    // The list exported; each platform's manifest tagged in the layout
    // (by its architecture) for umoci, which unpacks a tag.
    lane::require(lane::Lane::Umoci);
    let layout = t.path().join("oci-out");
    ok(jbuild(&root)
        .arg("export")
        .arg("out:multi")
        .arg(format!("oci:{}:multi", layout.display())));
    let index_path = layout.join("index.json");
    let mut index: Value = serde_json::from_slice(&fs::read(&index_path).unwrap()).unwrap();
    for image in images {
        let arch = image["platform"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        let digest = image["manifest"].as_str().unwrap();
        let hex = digest.strip_prefix("sha256:").unwrap();
        let size = fs::metadata(layout.join("blobs/sha256").join(hex))
            .unwrap()
            .len();
        index["manifests"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest,
                "size": size,
                "annotations": {"org.opencontainers.image.ref.name": arch},
            }));
    }
    fs::write(&index_path, serde_json::to_vec(&index).unwrap()).unwrap();
    for image in images {
        let platform = image["platform"].as_str().unwrap();
        let arch = platform.rsplit('/').next().unwrap();
        let rootfs = t.path().join(format!("rootfs-{arch}"));
        umoci_unpack(&format!("{}:{arch}", layout.display()), &rootfs, true);
        assert_eq!(
            fs::read_to_string(rootfs.join("got.txt")).unwrap(),
            format!("made for {arch}\n"),
            "{platform}"
        );
    }
}
