//! The pull policy (docs/policy.md) against the real registry, cosign and
//! `jbuild sign`: refusals name the rule and store nothing, signed images
//! are accepted, scopes and identities as containers-policy.json(5) says,
//! FROM and create under `[trust]`, import by transport.

use super::*;

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
    let (key, public) = cosign_keys(home);
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
    // `jbuild info` names the policy in force and its default.
    let info = succeeds(&run_bounded(jbuild(&p).args(["--json", "info"]), LIMIT));
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["pull_policy"], format!("{origin} (default: reject)"));
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
    let (key, public) = cosign_keys(home);
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
