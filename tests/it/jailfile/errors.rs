//! Malformed Jailfiles: each error names the file, line and column, says
//! what is wrong, and (checked for some) renders the line with a caret.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use jbuild::jailfile::{load, load_str, Diagnostic};

fn error(src: &str) -> Diagnostic {
    match load_str(Path::new("web/Jailfile"), src, &BTreeMap::new()) {
        Ok(b) => panic!("expected an error for {src:?}, got {b:?}"),
        Err(e) => e,
    }
}

fn check(src: &str, line: u32, column: u32, message: &str) -> Diagnostic {
    let e = error(src);
    assert_eq!(
        (
            e.file.to_str().unwrap(),
            e.line,
            e.column,
            e.message.as_str()
        ),
        ("web/Jailfile", line, column, message),
        "\n{e}"
    );
    assert!(!e.to_string().starts_with("error:"));
    e
}

macro_rules! cases {
    ($($name:ident: $src:expr => $line:expr, $col:expr, $msg:expr;)*) => {
        $(#[test] fn $name() { check($src, $line, $col, $msg); })*
    };
}

cases! {
    unknown_instruction: "FROM scratch\nRUNN x" => 2, 1, "unknown instruction `RUNN`";
    missing_arguments: "FROM scratch\nUSER" => 2, 5, "USER needs more arguments";
    copy_without_destination: "FROM scratch\nCOPY a" => 2, 7, "COPY needs at least one source and a destination";
    instruction_before_from: "ARG A=1\nENV B=2\nFROM scratch" => 2, 1, "ENV comes before the first FROM; only ARG may";
    unterminated_heredoc: "FROM scratch\nRUN cat <<EOF >x\nbody\nEO" => 2, 9, "unterminated heredoc: no line `EOF` ends `<<EOF`";
    unterminated_quote: "FROM scratch\nLABEL a=\"b c" => 2, 9, "unterminated quote: this `\"` is never closed";
    unterminated_brace: "FROM scratch\nENV A=${B" => 2, 7, "unterminated `${`: no `}` closes it";
    empty_variable_name: "FROM scratch\nWORKDIR /${}" => 2, 10, "bad substitution: expected a variable name after `${`";
    unsupported_modifier: "FROM scratch\nENV A=${B^^}" => 2, 10, "unsupported modifier `^` in `${B...}`";
    duplicate_stage: "FROM scratch AS web\nFROM scratch AS WEB" => 2, 17, "duplicate stage name `web`";
    copy_from_unknown_stage: "FROM scratch AS builder\nFROM scratch\nCOPY --from=buildr /a /b" => 3, 13, "unknown stage `buildr`";
    copy_from_later_stage: "FROM scratch\nCOPY --from=late /a /b\nFROM scratch AS late" => 2, 13, "stage `late` is defined later, at line 3";
    copy_from_current_stage: "FROM scratch AS me\nCOPY --from=0 /a /b" => 2, 13, "COPY --from=0 is the stage this COPY is in";
    service_bad_action: "FROM scratch\nSERVICE nginx restart" => 2, 15, "unknown SERVICE action `restart`";
    sysrc_without_equals: "FROM scratch\nSYSRC nginx_enable YES" => 2, 7, "expected name=value, found `nginx_enable`";
    copy_without_arguments: "FROM scratch\nCOPY" => 2, 5, "COPY needs at least one source and a destination";
    sysrc_bad_name: "FROM scratch\nSYSRC nginx-enable=YES" => 2, 7, "invalid rc.conf variable name `nginx-enable`";
    expose_bad_port: "FROM scratch\nEXPOSE 80 8o" => 2, 11, "invalid port `8o`";
    expose_bad_protocol: "FROM scratch\nEXPOSE 80/tpc" => 2, 8, "unknown protocol `tpc` in `80/tpc`";
    bad_chmod: "FROM scratch\nCOPY --chmod=u+x a /b" => 2, 14, "invalid --chmod `u+x`";
    unknown_run_flag: "FROM scratch\nRUN --security=insecure make" => 2, 5, "`--security` is not supported on RUN";
    mount_unknown_type: "FROM scratch\nRUN --mount=type=overlay,target=/x true" => 2, 18, "unknown mount type `overlay`";
    mount_without_type: "FROM scratch\nRUN --mount=target=/x true" => 2, 13, "--mount needs a type";
    mount_cache_without_target: "FROM scratch\nRUN --mount=type=cache true" => 2, 13, "a cache mount needs target=PATH";
    mount_bad_sharing: "FROM scratch\nRUN --mount=type=cache,target=/x,sharing=maybe true" => 2, 42, "unknown sharing mode `maybe`";
    mount_relative_target: "FROM scratch\nRUN --mount=type=tmpfs,target=tmp true" => 2, 31, "mount target `tmp` is not an absolute path";
    mount_root_target: "FROM scratch\nRUN --mount=type=tmpfs,target=/. true" => 2, 31, "a mount cannot cover the whole root";
    mount_option_of_another_type: "FROM scratch\nRUN --mount=type=tmpfs,target=/t,rw true" => 2, 34, "`rw` is not an option of a tmpfs mount";
    mount_secret_without_id: "FROM scratch\nRUN --mount=type=secret true" => 2, 13, "a secret mount needs id=ID";
    mount_secret_bad_mode: "FROM scratch\nRUN --mount=type=secret,id=a,mode=999 true" => 2, 35, "invalid mount mode `999`";
    mount_secret_bad_uid: "FROM scratch\nRUN --mount=type=secret,id=a,uid=root true" => 2, 34, "`uid=root`: expected a number";
    mount_secret_bad_required: "FROM scratch\nRUN --mount=type=secret,id=a,required=maybe true" => 2, 39, "`required=maybe`: expected true or false";
    mount_id_with_slash: "FROM scratch\nRUN --mount=type=cache,target=/c,id=a/b true" => 2, 37, "invalid mount id `a/b`";
    mount_bind_source_escapes: "FROM scratch\nRUN --mount=type=bind,target=/x,source=../etc true" => 2, 40, "bind source `../etc` leaves its root";
    mount_option_twice: "FROM scratch\nRUN --mount=type=cache,target=/a,target=/b true" => 2, 34, "mount option `target` is given twice";
    mount_bad_tmpfs_size: "FROM scratch\nRUN --mount=type=tmpfs,target=/t,size=lots true" => 2, 39, "invalid tmpfs size `lots`";
    mount_bind_from_own_stage: "FROM scratch AS me\nRUN --mount=type=bind,target=/x,from=me true" => 2, 38, "--mount from=me is the stage this RUN is in";
    mount_bind_from_unknown_stage: "FROM scratch AS a\nFROM scratch\nRUN --mount=type=bind,target=/x,from=b true" => 3, 38, "unknown stage `b`";
    bad_network: "FROM scratch\nRUN --network=bridge true" => 2, 15, "unknown network mode `bridge`";
    empty_jailfile: "\n# nothing here\n\n" => 1, 1, "the Jailfile is empty";
    no_from: "ARG A=1\n" => 1, 1, "no FROM instruction";
    add_checksum_needs_one_url: "FROM scratch\nADD --checksum=sha256:0000000000000000000000000000000000000000000000000000000000000000 a.tgz /" => 2, 16, "--checksum needs exactly one source, an http:// or https:// URL";
    add_checksum_not_a_digest: "FROM scratch\nADD --checksum=md5:abc https://example.org/x.tgz /" => 2, 16, "`--checksum=md5:abc` is not a sha256 digest";
    add_keep_git_dir_without_git: "FROM scratch\nADD --keep-git-dir a.tgz /" => 2, 1, "--keep-git-dir is for a git repository source";
    add_url_naming_no_file: "FROM scratch\nADD https://example.org/ /dl/" => 2, 26, "`https://example.org/` names no file, so ADD cannot name it inside `/dl/`";
    add_has_no_from: "FROM scratch\nADD --from=x a /" => 2, 5, "`--from` is not supported on ADD";
    healthcheck_without_cmd: "FROM scratch\n  healthcheck true" => 2, 15, "HEALTHCHECK expects CMD or NONE, found `true`";
    healthcheck_bad_duration: "FROM scratch\nHEALTHCHECK --interval=soon CMD true" => 2, 24, "`soon` is not a duration";
    healthcheck_below_a_millisecond: "FROM scratch\nHEALTHCHECK --timeout=10us CMD true" => 2, 23, "--timeout=10us is less than a millisecond";
    healthcheck_none_with_options: "FROM scratch\nHEALTHCHECK --retries=3 NONE" => 2, 23, "HEALTHCHECK NONE takes no options";
    stopsignal_unknown: "FROM scratch\nSTOPSIGNAL SIGNOPE" => 2, 12, "`SIGNOPE` is not a signal";
    shell_not_json: "FROM scratch\nSHELL /bin/bash -c" => 2, 7, "SHELL takes a JSON array: the shell and its options";
    onbuild_onbuild: "FROM scratch\nONBUILD onbuild RUN true" => 2, 9, "ONBUILD cannot trigger another ONBUILD";
    onbuild_from: "FROM scratch\nONBUILD FROM scratch" => 2, 9, "FROM cannot be an ONBUILD trigger";
    onbuild_maintainer: "FROM scratch\nONBUILD MAINTAINER me" => 2, 9, "MAINTAINER cannot be an ONBUILD trigger";
    onbuild_bad_trigger: "FROM scratch\nONBUILD COPY --link=maybe a /b" => 2, 21, "`--link=maybe`: expected true or false";
    bad_stage_name: "FROM scratch AS 2nd" => 1, 17, "invalid stage name `2nd`";
    invalid_json_in_copy: "FROM scratch\nCOPY [\"a\", b] /c" => 2, 12, "invalid JSON array: expected value";
    invalid_json_in_volume: "FROM scratch\nVOLUME [\"/a\" \"/b\"]" => 2, 14, "invalid JSON array: expected `,` or `]`";
    uppercase_image: "FROM Nginx:1.25" => 1, 6, "image names must be lowercase: `Nginx:1.25`";
    bad_image_reference: "FROM ghcr.io//x" => 1, 6, "invalid image reference `ghcr.io//x`";
    not_a_release: "FROM freebsd:14" => 1, 6, "`14` is not a FreeBSD release";
    from_later_stage: "FROM builder\nFROM scratch AS builder" => 1, 6, "stage `builder` is defined later, at line 2";
    from_empty_after_substitution: "ARG BASE\nFROM $BASE" => 2, 6, "`$BASE` expands to an empty image name";
    required_variable: "FROM scratch\nARG V\nENV X=${V:?set V with --build-arg}" => 3, 7, "V: set V with --build-arg";
    several_sysrc_assignments: "FROM scratch\nSYSRC a=1 b=2" => 2, 11, "SYSRC takes one assignment per line";
    too_many_arguments: "FROM scratch\nRENDER a b" => 2, 10, "RENDER takes one argument; unexpected `b`";
    copy_several_sources_to_a_file: "FROM scratch\nCOPY a b /c" => 2, 10, "COPY has 2 sources, so the destination `/c` must be a directory ending in `/`";
    heredoc_without_destination: "FROM scratch\nCOPY <<EOF\nx\nEOF" => 2, 11, "COPY needs a destination after the heredoc";
    bad_escape_directive: "# escape=/\nFROM scratch" => 1, 10, "invalid escape character `/`";
    pkg_option: "FROM scratch\nPKG -f nginx" => 2, 5, "PKG takes package names, not options (`-f`)";
    pkg_scripts_value: "FROM scratch\nPKG --scripts=run nginx" => 2, 5, "PKG --scripts: `run` is not a way to treat package scripts; use refuse (the default) or defer";
    pkg_scripts_after_packages: "FROM scratch\nPKG nginx --scripts=defer" => 2, 11, "PKG takes package names, not options (`--scripts=defer`)";
    env_without_value: "FROM scratch\nENV LONELY" => 2, 11, "ENV `LONELY` needs a value";
    bad_arg_name: "FROM scratch\nARG my-arg=1" => 2, 5, "invalid ARG name `my-arg`";
    flag_without_value: "FROM scratch\nCOPY --chown a /b" => 2, 6, "`--chown` needs a value";
}

#[test]
fn renders_unknown_instruction_with_a_suggestion() {
    let e = check(
        "FROM scratch\n\nRUNN pkg install -y nginx\n",
        3,
        1,
        "unknown instruction `RUNN`",
    );
    let want = "unknown instruction `RUNN`
  --> web/Jailfile:3:1
   |
 3 | RUNN pkg install -y nginx
   | ^^^^
   = help: did you mean `RUN`?";
    assert_eq!(e.to_string(), want);
}

#[test]
fn renders_a_caret_under_the_offending_word() {
    let e = check(
        "FROM scratch\nCOPY --form=builder a /b",
        2,
        6,
        "`--form` is not supported on COPY",
    );
    let want = "`--form` is not supported on COPY
  --> web/Jailfile:2:6
   |
 2 | COPY --form=builder a /b
   |      ^^^^^^^^^^^^^^
   = help: did you mean `--from`? supported: --from, --chown, --chmod, --link, --parents, --exclude";
    assert_eq!(e.to_string(), want);
}

#[test]
fn columns_count_characters_and_carets_expand_tabs() {
    let src = "FROM scratch\n\tLABEL ünïcødé=\"x\" k=\"v";
    let e = check(src, 2, 22, "unterminated quote: this `\"` is never closed");
    let want = format!(
        " 2 |     LABEL ünïcødé=\"x\" k=\"v\n   | {}^\n",
        " ".repeat(24)
    );
    assert!(e.to_string().contains(&want), "{e}");
}

#[test]
fn two_digit_line_numbers_widen_the_gutter() {
    let src = format!("FROM scratch\n{}SERVICE nginx maybe", "\n".repeat(10));
    let e = check(&src, 12, 15, "unknown SERVICE action `maybe`");
    let want = "unknown SERVICE action `maybe`
   --> web/Jailfile:12:15
    |
 12 | SERVICE nginx maybe
    |               ^^^^^
    = help: use enable or disable (on/off and yes/no also work)";
    assert_eq!(e.to_string(), want);
}

#[test]
fn errors_in_continued_lines_point_at_the_right_physical_line() {
    let e = check(
        "FROM scratch\nEXPOSE 80 \\\n  # comment\n  443 \\\n  99999",
        5,
        3,
        "invalid port `99999`",
    );
    assert_eq!(e.source_line, "  99999");
}

#[test]
fn errors_in_included_files_name_that_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("Jailfile"),
        "FROM scratch\nINCLUDE parts/svc.jf\n",
    )
    .unwrap();
    fs::create_dir(dir.path().join("parts")).unwrap();
    fs::write(
        dir.path().join("parts/svc.jf"),
        "PKG nginx\nSERVICE nginx sometimes\n",
    )
    .unwrap();
    let e = load(&dir.path().join("Jailfile"), &BTreeMap::new()).unwrap_err();
    assert_eq!(
        (e.line, e.column, e.message.as_str()),
        (2, 15, "unknown SERVICE action `sometimes`")
    );
    assert!(e.file.ends_with("parts/svc.jf"), "{e}");
    assert_eq!(e.source_line, "SERVICE nginx sometimes");
}

#[test]
fn include_cycle_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("Jailfile"), "FROM scratch\nINCLUDE a.jf\n").unwrap();
    fs::write(dir.path().join("a.jf"), "INCLUDE Jailfile\n").unwrap();
    let e = load(&dir.path().join("Jailfile"), &BTreeMap::new()).unwrap_err();
    assert!(
        e.file.ends_with("a.jf") && (e.line, e.column) == (1, 9),
        "{e}"
    );
    let root = dir.path().join("Jailfile").display().to_string();
    let a = dir.path().join("a.jf").display().to_string();
    assert_eq!(e.message, format!("INCLUDE cycle: {root} → {a} → {root}"));
}

#[test]
fn include_of_a_missing_file() {
    let e = check(
        "FROM scratch\nINCLUDE common/base.jf",
        2,
        9,
        "cannot read included file `web/common/base.jf`: no such file",
    );
    assert_eq!(e.span_len, 14);
    assert_eq!(
        e.help.as_deref(),
        Some("INCLUDE paths are relative to the including file's directory (`web`)")
    );
}

/// `INCLUDE /dev/zero`, `-f /dev/zero`, or a file included over and over:
/// bounded reads, an error naming the line, not a process filling memory.
#[test]
fn endless_or_huge_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let jf = dir.path().join("Jailfile");
    // A device outside the Jailfile's directory is not read at all; a
    // file too large inside it is refused by its size, before reading.
    fs::write(&jf, "FROM scratch\nINCLUDE /dev/zero\n").unwrap();
    let e = load(&jf, &BTreeMap::new()).unwrap_err();
    assert_eq!((e.line, e.column), (2, 9), "{e}");
    assert!(
        e.message
            .starts_with("cannot read included file `/dev/zero`: it is outside"),
        "{e}"
    );
    fs::write(dir.path().join("huge.jf"), vec![b'#'; 5 << 20]).unwrap();
    fs::write(&jf, "FROM scratch\nINCLUDE huge.jf\n").unwrap();
    let e = load(&jf, &BTreeMap::new()).unwrap_err();
    assert!(e.message.contains("huge.jf`: more than 4 MiB"), "{e}");

    let e = jbuild::jailfile::read(Path::new("/dev/zero")).unwrap_err();
    assert!(e.message.contains("more than 4 MiB"), "{e}");

    // 3 MiB of comments, included 6 times: each file is fine, the sum is not.
    let part = format!("{}RUN true\n", "# padding\n".repeat(300_000));
    fs::write(dir.path().join("part.jf"), part).unwrap();
    fs::write(
        &jf,
        format!("FROM scratch\n{}", "INCLUDE part.jf\n".repeat(6)),
    )
    .unwrap();
    let e = load(&jf, &BTreeMap::new()).unwrap_err();
    assert_eq!(e.line, 7, "{e}");
    assert!(e.message.contains("INCLUDEs hold more than 16 MiB"), "{e}");
    fs::write(
        &jf,
        format!("FROM scratch\n{}", "INCLUDE part.jf\n".repeat(5)),
    )
    .unwrap();
    let b = load(&jf, &BTreeMap::new()).unwrap();
    assert!(format!("{b:?}").matches("true").count() >= 5);
}
