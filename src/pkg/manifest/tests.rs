use super::*;

/// A `+MANIFEST` as pkg 2.4+ writes one (`pkg_emit_object`, compact JSON),
/// with every kind of key.
const FULL: &str = r#"{"name":"nginx","origin":"www/nginx","version":"1.26.2_4,3",
"comment":"Robust and small WWW server","maintainer":"joneum@FreeBSD.org",
"www":"https://nginx.org/","abi":"FreeBSD:14:amd64","arch":"freebsd:14:x86:64",
"prefix":"/usr/local","flatsize":1234567,"licenselogic":"dual",
"licenses":["BSD2CLAUSE","MIT"],"desc":"nginx is 100%25 fast\ncaf%c3%a9",
"deps":{"pcre2":{"origin":"devel/pcre2","version":"10.44"},"zlib":{"origin":"archivers/zlib","version":12}},
"categories":["www"],"users":["www"],"groups":["www"],
"shlibs_required":["libpcre2-8.so.0"],"shlibs_provided":["libngx.so.1"],
"shlibs_required_ignore":["libfoo.so.1"],
"conflicts":["nginx-devel-*"],"provides":["httpd"],"requires":["pcre"],
"options":{"HTTP":"on","MAIL":"off","DEBUG":false},
"annotations":{"FreeBSD_version":"1402000","flavor":"default"},
"files":{"/usr/local/sbin/nginx":{"sum":"1$abc","uname":"root","gname":"wheel","perm":"0555","fflags":"schg","mtime":1700000000},
"/usr/local/etc/nginx/nginx.conf.sample":"1$def",
"/usr/local/lib/libngx.so":{"sum":"1$ghi","symlink_target":"libngx.so.1","perm":755},
"/usr/local/share/doc/nginx/a%20b":"-"},
"config":["/usr/local/etc/nginx/nginx.conf"],
"directories":{"/usr/local/etc/nginx":"y","/var/db/nginx":{"uname":"www","gname":"www","perm":"0750"},"/var/log/nginx":true},
"scripts":{"pre-install":"echo 100%25","post-deinstall":"rm -f x","pre-upgrade":"ignored"},
"lua_scripts":{"post-install":["print(1)","print(2)"],"pre-deinstall":["print(3)"],"bogus":["x"]},
"messages":[{"message":"Hello"},{"message":"Up","type":"upgrade","minimum_version":"1.0","maximum_version":"2.0"},{"message":"Bye","type":"remove"}],
"vital":true,"dep_formula":"pcre2","unknown_future_key":{"x":1}}"#;

#[test]
fn every_key_of_a_full_manifest_is_read() {
    let m = parse(FULL, "nginx").unwrap();
    assert_eq!(
        (m.name.as_str(), m.origin.as_str(), m.version.as_str()),
        ("nginx", "www/nginx", "1.26.2_4,3")
    );
    assert_eq!(m.abi, "FreeBSD:14:amd64");
    assert_eq!(m.arch, "freebsd:14:x86:64");
    assert_eq!(m.prefix, "/usr/local");
    assert_eq!(m.flatsize, 1234567);
    assert_eq!(m.licenselogic, LicenseLogic::Or);
    assert_eq!(m.licenselogic.db_value(), 124);
    assert_eq!(m.licenses, ["BSD2CLAUSE", "MIT"]);
    assert_eq!(m.desc, "nginx is 100% fast\ncafé");
    assert_eq!(
        m.deps,
        [
            Dep {
                name: "pcre2".into(),
                origin: "devel/pcre2".into(),
                version: "10.44".into()
            },
            Dep {
                name: "zlib".into(),
                origin: "archivers/zlib".into(),
                version: "12".into()
            }
        ]
    );
    assert_eq!(m.users, ["www"]);
    assert_eq!(m.groups, ["www"]);
    assert_eq!(m.shlibs_required, ["libpcre2-8.so.0"]);
    assert_eq!(m.shlibs_provided, ["libngx.so.1"]);
    assert_eq!(m.shlibs_required_ignore, ["libfoo.so.1"]);
    assert_eq!(m.conflicts, ["nginx-devel-*"]);
    assert_eq!(m.provides, ["httpd"]);
    assert_eq!(m.requires, ["pcre"]);
    assert_eq!(
        m.options,
        [
            ("HTTP".to_string(), "on".to_string()),
            ("MAIL".into(), "off".into()),
            ("DEBUG".into(), "off".into())
        ]
    );
    assert_eq!(m.annotations.len(), 2);
    assert_eq!(m.files.len(), 4);
    let nginx = &m.files[0];
    assert_eq!(nginx.path, "/usr/local/sbin/nginx");
    assert_eq!(nginx.sum.as_deref(), Some("1$abc"));
    assert_eq!(nginx.uname.as_deref(), Some("root"));
    assert_eq!(nginx.perm, Some(0o555));
    assert_eq!(nginx.fflags, Some(crate::layer::fflags::SF_IMMUTABLE));
    assert_eq!(nginx.mtime, Some(1700000000));
    assert_eq!(m.files[1].sum.as_deref(), Some("1$def"));
    assert_eq!(m.files[2].perm, Some(0o755), "a number is read as octal");
    assert_eq!(m.files[2].symlink_target.as_deref(), Some("libngx.so.1"));
    assert_eq!(m.files[3].path, "/usr/local/share/doc/nginx/a b");
    assert_eq!(m.files[3].sum, None, "`-` is no sum");
    assert_eq!(m.config, ["/usr/local/etc/nginx/nginx.conf"]);
    assert_eq!(m.directories.len(), 3);
    assert_eq!(m.directories[1].perm, Some(0o750));
    assert_eq!(m.directories[1].uname.as_deref(), Some("www"));
    assert_eq!(
        m.scripts,
        [
            (ScriptType::PreInstall, "echo 100%".to_string()),
            (ScriptType::PostDeinstall, "rm -f x".into())
        ],
        "URL-decoded; pkg 1's upgrade scripts are skipped"
    );
    assert_eq!(
        m.lua_scripts,
        [
            (LuaScriptType::PostInstall, "print(1)".to_string()),
            (LuaScriptType::PostInstall, "print(2)".into()),
            (LuaScriptType::PreDeinstall, "print(3)".into())
        ]
    );
    assert_eq!(m.messages.len(), 3);
    assert_eq!(m.messages[1].kind, MessageType::Upgrade);
    assert_eq!(m.messages[1].minimum_version.as_deref(), Some("1.0"));
    assert_eq!(m.messages[2].kind, MessageType::Remove);
    assert!(m.vital);
    assert_eq!(m.dep_formula.as_deref(), Some("pcre2"));
    assert_eq!(
        m.message_json().unwrap(),
        r#"[{"message":"Hello"},{"message":"Up","type":"upgrade","maximum_version":"2.0","minimum_version":"1.0"},{"message":"Bye","type":"remove"}]"#
    );
}

#[test]
fn old_forms_are_read_as_pkg_reads_them() {
    // pkg 1.x: `shlibs`, `dirs`, a legacy `message` string, an array of
    // dependency objects, users as an object, arch without abi.
    let m = parse(
        r#"name: old; origin: "a/old"; version: 1; arch: "freebsd:9:x86:64";
        shlibs: ["libz.so.5"]; dirs: ["/usr/local/old", {"/usr/local/o2": {perm: "0700"}}];
        message: "hi"; deps { z: [{origin: "a/z", version: "1"}] }; users { www: "80" };
        licenselogic: multi"#,
        "old",
    )
    .unwrap();
    assert_eq!(m.version, "1");
    assert_eq!(m.abi, "freebsd:9:x86:64");
    assert_eq!(m.shlibs_required, ["libz.so.5"]);
    assert_eq!(m.directories.len(), 2);
    assert_eq!(m.directories[1].perm, Some(0o700));
    assert_eq!(m.messages[0].kind, MessageType::Always);
    assert_eq!(m.deps[0].origin, "a/z");
    assert_eq!(m.users, ["www"]);
    assert_eq!(m.licenselogic, LicenseLogic::And);
}

#[test]
fn a_compact_manifest_has_no_files() {
    let m = parse(
        r#"{"name":"a","origin":"t/a","version":"1","prefix":"/usr/local","sum":"2$x","pkgsize":9,"path":"All/a-1.pkg"}"#,
        "a",
    )
    .unwrap();
    assert!(m.files.is_empty() && m.directories.is_empty() && m.scripts.is_empty());
    assert_eq!(m.sum.as_deref(), Some("2$x"));
    assert_eq!(m.repopath.as_deref(), Some("All/a-1.pkg"));
    assert_eq!(m.pkgsize, 9);
    assert_eq!(m.message_json(), None);
}

#[test]
fn what_pkg_refuses_is_refused_naming_it() {
    let base = r#""name":"a","origin":"t/a","version":"1""#;
    let err = |extra: &str| {
        parse(&format!("{{{base},{extra}}}"), "a-1")
            .unwrap_err()
            .to_string()
    };
    assert!(err(r#""files":["x"]"#).contains("`files` is not an object"));
    assert!(err(r#""flatsize":"big""#).contains("`flatsize` is not a number"));
    assert!(err(r#""licenselogic":"maybe""#).contains("licenselogic `maybe`"));
    assert!(err(r#""deps":{"b":{"version":"1"}}"#).contains("`b` has no origin"));
    assert!(err(r#""messages":[{"type":"install"}]"#).contains("no `message`"));
    let e = err(r#""files":{"../../etc/passwd":"1$x"}"#);
    assert!(e.contains("a-1") && e.contains("../../etc/passwd"), "{e}");
    assert!(err(r#""files":{"/usr/%2e%2e/%2e%2e/etc/x":"1$x"}"#).contains("/usr/../../etc/x"));
    assert!(err(r#""directories":{"/a/%00b":"y"}"#).contains("%-escape"));
    assert!(err(r#""files":{"/a":{"perm":"rwx"}}"#).contains("not a mode"));
    let e = parse(r#"{"name":"a","version":"1"}"#, "a").unwrap_err();
    assert!(e.to_string().contains("no `origin`"), "{e}");
    let e = parse(r#"{"name":"../x","origin":"a","version":"1"}"#, "x").unwrap_err();
    assert!(e.to_string().contains("not a package name"), "{e}");
    let e = parse("{not json", "x").unwrap_err();
    assert!(e.to_string().starts_with("x: line 1"), "{e}");
}

#[test]
fn a_manifest_is_bounded() {
    let big = vec![b' '; MAX_MANIFEST + 1];
    let e = parse_bytes(&big, "big").unwrap_err();
    assert!(matches!(e, ManifestError::TooLarge { .. }), "{e}");
    assert!(matches!(
        parse_bytes(b"\xff\xfe", "bin").unwrap_err(),
        ManifestError::NotText { .. }
    ));
    let deep = format!(
        r#"{{"name":"a","origin":"a","version":"1","x":{}{}}}"#,
        "[".repeat(LIMITS.depth + 1),
        "]".repeat(LIMITS.depth + 1)
    );
    assert!(parse(&deep, "a")
        .unwrap_err()
        .to_string()
        .contains("deeper"));
}

#[test]
fn urldecode_is_pkgs() {
    assert_eq!(urldecode("a%20b%25c").unwrap(), "a b%c");
    assert_eq!(urldecode("caf%c3%a9").unwrap(), "café");
    assert!(urldecode("a%2").is_err());
    assert!(urldecode("a%zz").is_err());
    assert!(urldecode("%ff").is_err());
}

#[test]
fn script_and_lua_types_have_pkgs_numbers() {
    assert_eq!(ScriptType::PreInstall.db_value(), 0);
    assert_eq!(ScriptType::Install.db_value(), 6);
    assert_eq!(ScriptType::Deinstall.db_value(), 7);
    assert_eq!(ScriptType::from_db(3), Some(ScriptType::PostDeinstall));
    assert_eq!(LuaScriptType::PostInstall.db_value(), 1);
    assert_eq!(LicenseLogic::from_db(38), LicenseLogic::And);
}
