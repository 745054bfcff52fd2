//! Variables and their scopes, heredocs, INCLUDE, continuations and
//! comments.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use jbuild::jailfile::{load, load_str, Base, Build, Command, CopyOp, CopySource, Op};

fn build_with(src: &str, args: &[(&str, &str)]) -> Build {
    let args: BTreeMap<String, String> = args
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    load_str(Path::new("Jailfile"), src, &args).unwrap_or_else(|e| panic!("{e}"))
}

fn build(src: &str) -> Build {
    build_with(src, &[])
}

fn env_of(op: &Op) -> Vec<(String, String)> {
    match op {
        Op::Env(p) => p.clone(),
        other => panic!("not ENV: {other:?}"),
    }
}

fn env1(op: &Op) -> String {
    env_of(op).remove(0).1
}

fn map(v: &[(&str, &str)]) -> BTreeMap<String, String> {
    v.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

// ---- variables ----

#[test]
fn global_arg_is_for_from_only_unless_redeclared() {
    let src =
        "ARG REL=14.2-RELEASE\nARG TAG\nFROM freebsd:${REL}\nENV A=[$REL]\nARG REL\nENV B=[$REL]";
    let b = build(src);
    assert_eq!(
        b.stages[0].base,
        Base::FreeBsdRelease("14.2-RELEASE".into())
    );
    assert_eq!(b.stages[0].from_text, "FROM freebsd:14.2-RELEASE");
    let s = &b.stages[0].steps;
    assert_eq!(env1(&s[0].op), "[]");
    assert_eq!(env1(&s[1].op), "[14.2-RELEASE]");
    assert_eq!(s[1].args, map(&[("REL", "14.2-RELEASE")]));
    assert!(s[0].args.is_empty());
}

#[test]
fn build_args_override_defaults_and_unused_are_reported() {
    let src = "ARG REL=14.1-RELEASE\nFROM freebsd:$REL\nARG REL\nARG MODE=dev\nENV M=$MODE R=$REL";
    let b = build_with(
        src,
        &[
            ("REL", "14.2-RELEASE"),
            ("MODE", "prod"),
            ("NOPE", "1"),
            ("ALSO", ""),
        ],
    );
    assert_eq!(
        b.stages[0].base,
        Base::FreeBsdRelease("14.2-RELEASE".into())
    );
    assert_eq!(
        env_of(&b.stages[0].steps[0].op),
        [
            ("M".to_string(), "prod".to_string()),
            ("R".to_string(), "14.2-RELEASE".to_string())
        ]
    );
    assert_eq!(b.unused_build_args, ["ALSO", "NOPE"]);
}

#[test]
fn env_wins_over_arg_and_arg_scope_ends_with_the_stage() {
    let src = "FROM scratch AS one\nARG V=arg\nENV E1=$V\nENV V=env\nENV E2=$V\nARG V=again\nENV E3=${V}\n\
               FROM one\nENV E4=\"$V\" E5=${V2:-none}\nFROM scratch\nENV E6=x${V}x";
    let b = build(src);
    let s = &b.stages[0].steps;
    assert_eq!(env1(&s[0].op), "arg");
    assert_eq!(env1(&s[2].op), "env");
    assert_eq!(env1(&s[3].op), "env");
    // ENV shadows the ARG, so the step does not depend on the ARG.
    assert!(s[3].args.is_empty());
    assert_eq!(s[0].args, map(&[("V", "arg")]));
    // A stage built on `one` inherits its ENV, not its ARGs.
    assert_eq!(
        env_of(&b.stages[1].steps[0].op),
        [
            ("E4".to_string(), "env".to_string()),
            ("E5".to_string(), "none".to_string())
        ]
    );
    assert_eq!(env1(&b.stages[2].steps[0].op), "xx");
}

#[test]
fn modifiers_and_escapes() {
    let src = "FROM scratch\nARG SET=v\nARG EMPTY=\"\"\nARG UNSET\n\
               ENV A=${SET:-d} B=${EMPTY:-d} C=${EMPTY-d} D=${UNSET-d} E=${SET:+alt} F=${EMPTY:+alt} G=${EMPTY+alt} H=${UNSET+alt}\n\
               ENV I=\\$SET J='${SET}' K=\"\\$SET\" L=$$ M=${UNSET:-${SET}}";
    let b = build(src);
    let got: Vec<String> = b.stages[0]
        .steps
        .iter()
        .flat_map(|s| env_of(&s.op))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        got,
        ["v", "d", "", "d", "alt", "", "alt", "", "$SET", "${SET}", "$SET", "$$", "v"]
    );
}

#[test]
fn step_args_are_the_whole_scope_for_run_and_pkg_and_the_referenced_ones_otherwise() {
    let src = "FROM scratch\nARG A=1\nARG B=2\nARG C\nRUN echo hi\nPKG nginx\nCOPY $A /x\nLABEL l=${B}\nUSER www";
    let s = build(src).stages[0].steps.clone();
    let all = map(&[("A", "1"), ("B", "2")]);
    assert_eq!(s[0].args, all);
    assert_eq!(s[1].args, all);
    assert_eq!(s[2].args, map(&[("A", "1")]));
    assert_eq!(s[2].text, "COPY 1 /x");
    assert_eq!(s[3].args, map(&[("B", "2")]));
    assert!(s[4].args.is_empty());
}

#[test]
fn run_is_not_substituted() {
    let s = build("FROM scratch\nARG X=1\nRUN echo $X ${Y:-z}").stages[0].steps[0].clone();
    assert_eq!(
        s.op,
        Op::Run {
            command: Command::Shell("echo $X ${Y:-z}".into()),
            network: false,
            mounts: vec![],
        }
    );
    assert_eq!(s.text, "RUN echo $X ${Y:-z}");
}

#[test]
fn substitution_in_our_instructions() {
    let src = "FROM scratch\nARG S=nginx\nARG F=/etc/rc.conf\nARG D=/usr/local/www\nSERVICE $S enable\nSYSRC -f $F ${S}_flags=\"-c $D\"\n\
               LINE_IN_FILE \"root $D;\" $D/conf\nRENDER $D\nJAIL host.hostname=${S}.local\nWORKDIR $D\nEXPOSE ${PORT:-8080}";
    let o: Vec<Op> = build(src).stages[0]
        .steps
        .iter()
        .map(|s| s.op.clone())
        .collect();
    assert_eq!(
        o[0],
        Op::Service {
            name: "nginx".into(),
            enable: true
        }
    );
    assert_eq!(
        o[1],
        Op::Sysrc {
            file: "/etc/rc.conf".into(),
            name: "nginx_flags".into(),
            op: jbuild::jailfile::SysrcOp::Set,
            value: "-c /usr/local/www".into()
        }
    );
    assert_eq!(
        o[2],
        Op::LineInFile {
            line: "root /usr/local/www;".into(),
            file: "/usr/local/www/conf".into()
        }
    );
    assert!(matches!(&o[3], Op::Render { path, .. } if path == "/usr/local/www"));
    assert_eq!(
        o[4],
        Op::Jail(vec![("host.hostname".into(), "nginx.local".into())])
    );
    assert_eq!(o[5], Op::Workdir("/usr/local/www".into()));
    assert_eq!(o[6], Op::Expose(vec!["8080/tcp".into()]));
}

#[test]
fn escape_directive_changes_the_escape_character() {
    let src =
        "# escape=`\n# syntax=whatever\nFROM scratch\nENV A=`$HOME B=c:\\dir\nRUN echo a `\n  b";
    let s = build(src).stages[0].steps.clone();
    assert_eq!(
        env_of(&s[0].op),
        [
            ("A".to_string(), "$HOME".to_string()),
            ("B".to_string(), "c:\\dir".to_string())
        ]
    );
    assert_eq!(
        s[1].op,
        Op::Run {
            command: Command::Shell("echo a   b".into()),
            network: false,
            mounts: vec![],
        }
    );
}

// ---- continuations and comments ----

#[test]
fn continuation_lines_and_comments() {
    let src = "  # leading comment\n\nFROM scratch\n# comment\nRUN pkg install -y \\\n# skipped comment\n    nginx \\\n\n    curl\n  COPY a \\\n  /b  \n";
    let b = build(src);
    let s = &b.stages[0].steps;
    assert_eq!(
        s[0].op,
        Op::Run {
            command: Command::Shell("pkg install -y     nginx     curl".into()),
            network: false,
            mounts: vec![],
        }
    );
    assert_eq!(
        (s[0].location.line, s[1].location.line, s[1].location.column),
        (5, 10, 3)
    );
    assert_eq!(s[1].text, "COPY a   /b");
    // `#` after the start of a line is not a comment.
    let s = build("FROM scratch\nRUN echo a # b").stages[0].steps[0].clone();
    assert_eq!(
        s.op,
        Op::Run {
            command: Command::Shell("echo a # b".into()),
            network: false,
            mounts: vec![],
        }
    );
}

// ---- heredocs ----

#[test]
fn run_heredoc_alone_is_the_script() {
    let s = build("FROM scratch\nRUN <<EOF\nset -e\necho $HOME\nEOF\nRUN true").stages[0]
        .steps
        .clone();
    assert_eq!(
        s[0].op,
        Op::Run {
            command: Command::Shell("set -e\necho $HOME\n".into()),
            network: false,
            mounts: vec![],
        }
    );
    assert_eq!(s[0].text, "RUN <<EOF\nset -e\necho $HOME\nEOF");
    assert_eq!(s[1].location.line, 6);
}

#[test]
fn run_heredoc_as_stdin_keeps_the_whole_text() {
    let src = "FROM scratch\nRUN --network=host cat <<-'END' >/etc/motd && cat <<X\n\thello $USER\n\tEND\nx\nX";
    let s = build(src).stages[0].steps[0].clone();
    let want = "cat <<-'END' >/etc/motd && cat <<X\n\thello $USER\n\tEND\nx\nX";
    assert_eq!(
        s.op,
        Op::Run {
            command: Command::Shell(want.into()),
            network: true,
            mounts: vec![],
        }
    );
    assert_eq!(s.text, format!("RUN --network=host {want}"));
}

#[test]
fn copy_heredocs_inline_files() {
    let src = "FROM scratch\nARG NAME=web\nCOPY --chmod=0644 <<a.conf <<\"b.conf\" <<-c.conf /etc/\nname=$NAME \\$x 'q'\na.conf\nraw $NAME\nb.conf\n\t\tindented $NAME\n\tc.conf\n";
    let s = build(src).stages[0].steps[0].clone();
    let Op::Copy(CopyOp {
        sources,
        dest,
        chmod,
        ..
    }) = &s.op
    else {
        panic!()
    };
    assert_eq!(
        sources,
        &[
            CopySource::Inline {
                name: "a.conf".into(),
                content: "name=web $x 'q'\n".into()
            },
            CopySource::Inline {
                name: "b.conf".into(),
                content: "raw $NAME\n".into()
            },
            CopySource::Inline {
                name: "c.conf".into(),
                content: "indented web\n".into()
            },
        ]
    );
    assert_eq!((dest.as_str(), *chmod), ("/etc/", Some(0o644)));
    assert_eq!(s.args, map(&[("NAME", "web")]));
    assert_eq!(
        s.text,
        "COPY --chmod=0644 <<a.conf <<\"b.conf\" <<-c.conf /etc/\nname=web $x 'q'\na.conf\nraw $NAME\nb.conf\nindented web\n\tc.conf"
    );
    let s = build("FROM scratch\nCOPY <<EOF /etc/empty\nEOF").stages[0].steps[0].clone();
    assert!(
        matches!(&s.op, Op::Copy(CopyOp { sources, .. }) if sources == &[CopySource::Inline { name: "EOF".into(), content: String::new() }])
    );
}

// ---- INCLUDE ----

#[test]
fn include_nested_with_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("web/parts/more")).unwrap();
    fs::write(
        root.join("web/Jailfile"),
        "ARG PART=nothing\nFROM scratch\nARG PART\nINCLUDE ${PART}\nRUN last\n",
    )
    .unwrap();
    fs::write(
        root.join("web/parts/base.jf"),
        "# base\nPKG nginx\ninclude more/deep.jf\n",
    )
    .unwrap();
    fs::write(
        root.join("web/parts/more/deep.jf"),
        "\n\nSERVICE nginx enable\n",
    )
    .unwrap();
    let b = load(
        &root.join("web/Jailfile"),
        &BTreeMap::from([("PART".to_string(), "parts/base.jf".to_string())]),
    )
    .unwrap();
    let s = &b.stages[0].steps;
    let where_: Vec<(String, u32)> = s
        .iter()
        .map(|s| {
            (
                s.location
                    .file
                    .strip_prefix(root)
                    .unwrap()
                    .display()
                    .to_string(),
                s.location.line,
            )
        })
        .collect();
    assert_eq!(
        where_,
        [
            ("web/parts/base.jf".into(), 2),
            ("web/parts/more/deep.jf".into(), 3),
            ("web/Jailfile".into(), 5)
        ]
    );
    assert!(b.unused_build_args.is_empty());
}

#[test]
fn include_may_bring_args_and_stages() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("args.jf"), "ARG REL=14.2-RELEASE\n").unwrap();
    fs::write(
        dir.path().join("builder.jf"),
        "FROM freebsd:$REL AS builder\nRUN make\n",
    )
    .unwrap();
    let main = dir.path().join("Jailfile");
    let src = "INCLUDE args.jf\nINCLUDE builder.jf\nFROM scratch\nCOPY --from=builder /out /\n";
    let b = load_str(&main, src, &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        b.stages[0].base,
        Base::FreeBsdRelease("14.2-RELEASE".into())
    );
    assert!(matches!(
        &b.stages[1].steps[0].op,
        Op::Copy(CopyOp {
            from: Some(jbuild::jailfile::CopyFrom::Stage(0)),
            ..
        })
    ));
}

#[test]
fn include_cycle_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("Jailfile"), "FROM scratch\nINCLUDE a.jf\n").unwrap();
    fs::write(dir.path().join("a.jf"), "RUN a\nINCLUDE ./sub/../b.jf\n").unwrap();
    fs::write(dir.path().join("b.jf"), "INCLUDE a.jf\n").unwrap();
    fs::create_dir(dir.path().join("sub")).unwrap();
    let e = load(&dir.path().join("Jailfile"), &BTreeMap::new()).unwrap_err();
    assert!(e.message.starts_with("INCLUDE cycle: "), "{e}");
    assert!(
        e.file.ends_with("b.jf") && e.line == 1 && e.column == 9,
        "{e}"
    );

    let e = load_str(
        &dir.path().join("Jailfile"),
        "FROM scratch\nINCLUDE nope.jf",
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(
        e.message.starts_with("cannot read included file")
            && e.message.ends_with("nope.jf`: no such file"),
        "{e}"
    );
    assert_eq!((e.line, e.column, e.span_len), (2, 9, 7));

    let e = load(&dir.path().join("missing"), &BTreeMap::new()).unwrap_err();
    assert!(e.message.contains("no such file") && e.line == 0, "{e}");
}

// ---- the reference's examples ----

/// Every `dockerfile` example in docs/jailfile.md loads (fragments without
/// a FROM get a `build` stage and a stage to live in; INCLUDE examples
/// need files and are skipped).
#[test]
fn the_reference_examples_load() {
    let doc = include_str!("../../../docs/jailfile.md");
    let mut blocks = 0;
    for block in doc.split("```dockerfile\n").skip(1) {
        let body = block.split("\n```").next().unwrap();
        if body.contains("INCLUDE") {
            continue;
        }
        let has_from = body
            .lines()
            .any(|l| l.trim_start().to_uppercase().starts_with("FROM "));
        let src = if has_from {
            format!("{body}\n")
        } else {
            format!("FROM scratch AS build\nFROM scratch\n{body}\n")
        };
        // As a build for freebsd/amd64 on amd64 gives them: the examples
        // use BuildKit's platform arguments.
        struct NoTriggers;
        impl jbuild::jailfile::Triggers for NoTriggers {
            fn onbuild(&self, _: &str, _: Option<&str>) -> Vec<String> {
                Vec::new()
            }
        }
        let platform_args = [
            ("TARGETPLATFORM", "freebsd/amd64"),
            ("TARGETOS", "freebsd"),
            ("TARGETARCH", "amd64"),
            ("TARGETVARIANT", ""),
            ("BUILDPLATFORM", "linux/amd64"),
            ("BUILDOS", "linux"),
            ("BUILDARCH", "amd64"),
            ("BUILDVARIANT", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let inputs = jbuild::jailfile::BuildInputs {
            context: Path::new("docs"),
            triggers: &NoTriggers,
            platform_args,
        };
        let path = Path::new("docs/jailfile.md");
        if let Err(e) = jbuild::jailfile::load_for_build(path, &src, &BTreeMap::new(), &inputs) {
            panic!("example does not load:\n{src}\n{e}");
        }
        blocks += 1;
    }
    assert!(blocks >= 15, "only {blocks} examples found");
}
