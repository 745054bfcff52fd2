use super::*;

fn parse(text: &str) -> Result<Policy, PolicyError> {
    Policy::parse("/etc/containers/policy.json", text.as_bytes())
}

fn r(s: &str) -> RegistryRef {
    RegistryRef::parse(s).unwrap()
}

fn invalid(text: &str) -> String {
    let e = parse(text).expect_err(text);
    assert!(matches!(e, PolicyError::Invalid { .. }), "{e:?}");
    assert!(e.is_user_error());
    let msg = e.to_string();
    assert!(msg.starts_with("/etc/containers/policy.json: "), "{msg}");
    msg
}

#[test]
fn debians_default_policy_reads() {
    let p = parse(
        r#"{"default":[{"type":"insecureAcceptAnything"}],
            "transports":{"docker-daemon":{"":[{"type":"insecureAcceptAnything"}]}}}"#,
    )
    .unwrap();
    assert_eq!(p.default, vec![Requirement::InsecureAcceptAnything]);
    let rule = p.rule(&r("alpine"));
    assert_eq!(rule.scope, "default");
}

#[test]
fn the_most_specific_scope_wins() {
    let p = parse(
        r#"{"default":[{"type":"reject"}],
            "transports":{"docker":{
              "":[{"type":"insecureAcceptAnything"}],
              "*.example.com":[{"type":"reject"}],
              "reg.example.com":[{"type":"insecureAcceptAnything"}],
              "reg.example.com/team":[{"type":"sigstoreSigned","keyPath":"/k.pub"}],
              "reg.example.com/team/app":[{"type":"reject"}],
              "reg.example.com/team/app:1.0":[{"type":"insecureAcceptAnything"}]
            }}}"#,
    )
    .unwrap();
    let scope = |s: &str| p.rule(&r(s)).scope;
    assert_eq!(
        scope("reg.example.com/team/app:1.0"),
        "reg.example.com/team/app:1.0"
    );
    assert_eq!(
        scope("reg.example.com/team/app:2.0"),
        "reg.example.com/team/app"
    );
    assert_eq!(scope("reg.example.com/team/web"), "reg.example.com/team");
    assert_eq!(scope("reg.example.com/other/web"), "reg.example.com");
    assert_eq!(scope("mirror.example.com/x"), "*.example.com");
    assert_eq!(scope("a.b.example.com:5000/x"), "*.example.com");
    assert_eq!(scope("example.com/x"), "");
    assert_eq!(scope("alpine"), "");
    let digest = "sha256:".to_string() + &"a".repeat(64);
    assert_eq!(
        scope(&format!("reg.example.com/team/app@{digest}")),
        "reg.example.com/team/app"
    );
}

#[test]
fn unknown_types_fields_and_gpg_are_refused_naming_the_file() {
    let m = invalid(r#"{"default":[{"type":"insecureAcceptAnything"}],"extra":1}"#);
    assert!(m.contains("`extra`"), "{m}");
    let m = invalid(r#"{"default":[{"type":"trustEveryone"}]}"#);
    assert!(m.contains("`trustEveryone`"), "{m}");
    let m = invalid(r#"{"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k.gpg"}]}"#);
    assert!(
        m.contains("signedBy") && m.contains("sigstoreSigned"),
        "{m}"
    );
    let m = invalid(r#"{"default":[{"type":"reject","keyPath":"/k"}]}"#);
    assert!(m.contains("`keyPath`"), "{m}");
    let m = invalid(r#"{"default":[]}"#);
    assert!(m.contains("empty"), "{m}");
    let m = invalid(r#"{"transports":{}}"#);
    assert!(m.contains("`default`"), "{m}");
    let m = invalid(r#"{"default":[{"type":"sigstoreSigned"}]}"#);
    assert!(m.contains("exactly one of keyPath"), "{m}");
    let m = invalid(r#"{"default":[{"type":"sigstoreSigned","keyPath":"/a","keyData":"eA=="}]}"#);
    assert!(m.contains("keyPath, keyData"), "{m}");
    let m = invalid(r#"{"default":[{"type":"sigstoreSigned","fulcio":{}}]}"#);
    assert!(m.contains("fulcio"), "{m}");
    let m = invalid(r#"{"default":[{"type":"sigstoreSigned","keyPath":"k.pub"}]}"#);
    assert!(m.contains("absolute"), "{m}");
    let m = invalid(
        r#"{"default":[{"type":"sigstoreSigned","keyPath":"/k","signedIdentity":{"type":"remapIdentity","prefix":"a","signedPrefix":"b"}}]}"#,
    );
    assert!(m.contains("remapIdentity"), "{m}");
    let m = invalid(
        r#"{"default":[{"type":"reject"}],"transports":{"docker":{"team/app":[{"type":"reject"}]}}}"#,
    );
    assert!(m.contains("registry host"), "{m}");
    let m = invalid(
        r#"{"default":[{"type":"reject"}],"transports":{"docker":{"*.a.com:5000":[{"type":"reject"}]}}}"#,
    );
    assert!(m.contains("wildcard"), "{m}");
    let m = invalid("{not json");
    assert!(m.contains("not JSON"), "{m}");
}

#[test]
fn sigstore_signed_reads_every_key_form_and_identity() {
    let p = parse(
        r#"{"default":[{"type":"sigstoreSigned","keyPaths":["/a.pub","/b.pub"],
            "signedIdentity":{"type":"exactRepository","dockerRepository":"reg.lan/app"}}]}"#,
    )
    .unwrap();
    assert_eq!(
        p.default,
        vec![Requirement::SigstoreSigned {
            keys: vec![
                KeySource::Path("/a.pub".into()),
                KeySource::Path("/b.pub".into())
            ],
            identity: SignedIdentity::ExactRepository("reg.lan/app".into()),
        }]
    );
    let p = parse(r#"{"default":[{"type":"sigstoreSigned","keyData":"UEVN"}]}"#).unwrap();
    assert_eq!(
        p.default,
        vec![Requirement::SigstoreSigned {
            keys: vec![KeySource::Data(b"PEM".to_vec())],
            identity: SignedIdentity::MatchRepoDigestOrExact,
        }]
    );
}

#[test]
fn signed_identities_match_as_the_man_page_says() {
    use SignedIdentity::*;
    let tagged = r("reg.lan/team/app:1.0");
    let digest = "sha256:".to_string() + &"b".repeat(64);
    let by_digest = r(&format!("reg.lan/team/app@{digest}"));
    // cosign and jbuild sign name the repository alone.
    let cosign = "reg.lan/team/app";
    assert!(!identity_matches(&MatchRepoDigestOrExact, &tagged, cosign));
    assert!(identity_matches(
        &MatchRepoDigestOrExact,
        &tagged,
        "reg.lan/team/app:1.0"
    ));
    assert!(!identity_matches(
        &MatchRepoDigestOrExact,
        &tagged,
        "reg.lan/team/app:2.0"
    ));
    assert!(identity_matches(
        &MatchRepoDigestOrExact,
        &by_digest,
        cosign
    ));
    assert!(identity_matches(&MatchRepository, &tagged, cosign));
    assert!(!identity_matches(
        &MatchRepository,
        &tagged,
        "reg.lan/team/other"
    ));
    assert!(identity_matches(
        &MatchExact,
        &tagged,
        "reg.lan/team/app:1.0"
    ));
    assert!(!identity_matches(&MatchExact, &by_digest, cosign));
    assert!(identity_matches(
        &ExactRepository("reg.lan/team/app".into()),
        &r("other.lan/x:1"),
        cosign
    ));
    assert!(identity_matches(
        &ExactReference("reg.lan/team/app:1.0".into()),
        &r("other.lan/x:1"),
        "reg.lan/team/app:1.0"
    ));
}

#[test]
fn trust_settings_map_to_the_same_rules() {
    let settings = Settings::parse(
        r#"
[trust]
default = "reject"

[[trust.scope]]
name = "registry.example/team"
require = "sigstoreSigned"
key = "/etc/jbuild/team.pub"
identity = "matchRepository"

[[trust.scope]]
name = "registry.example/public"
require = "insecureAcceptAnything"
"#,
    )
    .unwrap();
    let p = Policy::from_settings("config.toml [trust]", settings.trust.as_ref().unwrap()).unwrap();
    let json = parse(
        r#"{"default":[{"type":"reject"}],"transports":{"docker":{
            "registry.example/team":[{"type":"sigstoreSigned","keyPath":"/etc/jbuild/team.pub",
                "signedIdentity":{"type":"matchRepository"}}],
            "registry.example/public":[{"type":"insecureAcceptAnything"}]}}}"#,
    )
    .unwrap();
    assert_eq!(p.default, json.default);
    assert_eq!(p.transports, json.transports);

    let unnamed = Settings::parse("[[trust.scope]]\nrequire = \"reject\"\n").unwrap();
    let e = Policy::from_settings("c", unnamed.trust.as_ref().unwrap()).unwrap_err();
    assert!(e.to_string().contains("`name`"), "{e}");

    let bad =
        Settings::parse("[[trust.scope]]\nname = \"r.lan/x\"\nrequire = \"signedBy\"\n").unwrap();
    let e = Policy::from_settings("config.toml [trust]", bad.trust.as_ref().unwrap()).unwrap_err();
    assert!(e.to_string().starts_with("config.toml [trust]: "), "{e}");
    assert!(e.to_string().contains("signedBy"), "{e}");
}

#[test]
fn the_flag_wins_then_trust_then_containers_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("policy.json");
    std::fs::write(&file, r#"{"default":[{"type":"reject"}]}"#).unwrap();
    let mut settings = Settings::parse("[trust]\ndefault = \"insecureAcceptAnything\"\n").unwrap();
    let p = Policy::find(Some(&file), &settings).unwrap().unwrap();
    assert_eq!(p.default, vec![Requirement::Reject]);
    assert_eq!(p.origin, file.display().to_string());
    let p = Policy::find(None, &settings).unwrap().unwrap();
    assert_eq!(p.default, vec![Requirement::InsecureAcceptAnything]);
    settings.trust = None;
    let found = Policy::find(None, &settings).unwrap();
    assert_eq!(
        found.map(|p| p.origin),
        std::path::Path::new(SYSTEM_POLICY)
            .exists()
            .then(|| SYSTEM_POLICY.to_string())
    );
}

#[test]
fn oci_scopes_are_absolute_paths_matched_from_the_tag_up() {
    assert_eq!(
        path_scopes(Path::new("/srv/images/web"), Some("1.0")),
        [
            "/srv/images/web:1.0",
            "/srv/images/web",
            "/srv/images",
            "/srv",
            ""
        ]
    );
    let m = invalid(
        r#"{"default":[{"type":"reject"}],"transports":{"oci":{"images/web":[{"type":"reject"}]}}}"#,
    );
    assert!(m.contains("absolute path"), "{m}");
    let m = invalid(
        r#"{"default":[{"type":"reject"}],"transports":{"oci":{"/":[{"type":"reject"}]}}}"#,
    );
    assert!(m.contains("absolute path"), "{m}");
}

#[test]
fn a_user_other_than_root_has_a_policy_of_their_own() {
    let os = |s: &str| Some(std::ffi::OsString::from(s));
    assert_eq!(
        user_policy(false, os("/x"), os("/home/u")),
        Some(PathBuf::from("/x/containers/policy.json"))
    );
    assert_eq!(
        user_policy(false, os(""), os("/home/u")),
        Some(PathBuf::from("/home/u/.config/containers/policy.json"))
    );
    assert_eq!(user_policy(true, os("/x"), os("/root")), None);
}
