//! Every Jailfile instruction, in each of its forms, down to the resolved
//! `Op`, `Step.text` and `Location`.

use std::collections::BTreeMap;
use std::path::Path;

use jbuild::config::PkgScripts;
use jbuild::jailfile::{
    load_str, Base, Build, Command, CopyFrom, CopyOp, CopySource, Op, Step, SysrcOp,
};

fn build(src: &str) -> Build {
    load_str(Path::new("Jailfile"), src, &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// The steps of the last stage of `FROM scratch` + `body`.
fn steps(body: &str) -> Vec<Step> {
    let b = build(&format!("FROM scratch\n{body}"));
    let steps = &b.stages.last().unwrap().steps;
    steps.iter().map(|s| Step::clone(s)).collect()
}

fn ops(body: &str) -> Vec<Op> {
    steps(body).into_iter().map(|s| s.op).collect()
}

fn op(body: &str) -> Op {
    let mut o = ops(body);
    assert_eq!(o.len(), 1, "{o:?}");
    o.remove(0)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn from_forms() {
    let b = build(
        "FROM scratch AS Base\nFROM freebsd:14.2-release as builder\nFROM --platform=freebsd/arm64 BUILDER\n\
         FROM ghcr.io/acme/web:1.2@sha256:0123456789abcdef0123456789abcdef\nFROM freebsd:13.4-RELEASE-p2\nfrom nginx",
    );
    let bases: Vec<Base> = b.stages.iter().map(|s| s.base.clone()).collect();
    assert_eq!(
        bases,
        [
            Base::Scratch,
            Base::FreeBsdRelease("14.2-RELEASE".into()),
            Base::Stage(1),
            Base::Image("ghcr.io/acme/web:1.2@sha256:0123456789abcdef0123456789abcdef".into()),
            Base::FreeBsdRelease("13.4-RELEASE-p2".into()),
            Base::Image("nginx".into()),
        ]
    );
    assert_eq!(b.stages[0].name.as_deref(), Some("base"));
    assert_eq!(b.stages[1].name.as_deref(), Some("builder"));
    assert_eq!(b.stages[2].platform.as_deref(), Some("freebsd/arm64"));
    assert_eq!(
        b.stages[2].from_text,
        "FROM --platform=freebsd/arm64 BUILDER"
    );
    assert_eq!(b.stages[5].from_text, "FROM nginx");
    assert_eq!(
        (
            b.stages[2].index,
            b.stages[2].location.line,
            b.stages[2].location.column
        ),
        (2, 3, 1)
    );
    assert!(b.unused_build_args.is_empty());
}

#[test]
fn arg_declares_without_a_step() {
    let s = steps("ARG A B=2 C=\"x y\"\nRUN true");
    assert_eq!(s.len(), 1);
    assert_eq!(
        s[0].args,
        BTreeMap::from([("B".into(), "2".into()), ("C".into(), "x y".into())])
    );
}

#[test]
fn env_both_forms() {
    assert_eq!(
        op("ENV A=1 B=\"two words\" C='$A' D=a\\ b"),
        Op::Env(pairs(&[
            ("A", "1"),
            ("B", "two words"),
            ("C", "$A"),
            ("D", "a b")
        ]))
    );
    assert_eq!(
        op("ENV PATH /usr/local/bin:/bin  with space"),
        Op::Env(pairs(&[("PATH", "/usr/local/bin:/bin  with space")]))
    );
    // Every value on a line sees the variables as they were before it.
    let o = ops("ENV A=1\nENV A=2 B=$A\nENV C=$A");
    assert_eq!(o[1], Op::Env(pairs(&[("A", "2"), ("B", "1")])));
    assert_eq!(o[2], Op::Env(pairs(&[("C", "2")])));
}

#[test]
fn label_quoted_keys_and_values() {
    let s = steps("LABEL \"org.opencontainers.image.title\"=web version=\"1.0 beta\" x=");
    assert_eq!(
        s[0].op,
        Op::Label(pairs(&[
            ("org.opencontainers.image.title", "web"),
            ("version", "1.0 beta"),
            ("x", "")
        ]))
    );
    assert_eq!(
        s[0].text,
        "LABEL \"org.opencontainers.image.title\"=web version=\"1.0 beta\" x="
    );
    assert_eq!(
        op("LABEL maintainer Jane Doe"),
        Op::Label(pairs(&[("maintainer", "Jane Doe")]))
    );
}

#[test]
fn run_shell_exec_and_network() {
    let s = steps("RUN pkg install -y nginx && echo $HOME");
    assert_eq!(
        s[0].op,
        Op::Run {
            command: Command::Shell("pkg install -y nginx && echo $HOME".into()),
            network: false,
            mounts: vec![],
        }
    );
    assert_eq!(s[0].text, "RUN pkg install -y nginx && echo $HOME");
    assert_eq!((s[0].location.line, s[0].location.column), (2, 1));
    assert_eq!(
        op("RUN [\"/bin/echo\", \"a b\"]"),
        Op::Run {
            command: Command::Exec(strings(&["/bin/echo", "a b"])),
            network: false,
            mounts: vec![],
        }
    );
    assert_eq!(
        op("RUN --network=host fetch https://x"),
        Op::Run {
            command: Command::Shell("fetch https://x".into()),
            network: true,
            mounts: vec![],
        }
    );
    assert_eq!(
        op("RUN --network=none true"),
        Op::Run {
            command: Command::Shell("true".into()),
            network: false,
            mounts: vec![],
        }
    );
    // Not valid JSON: the shell form, as Docker does.
    assert_eq!(
        op("RUN ['a', 'b']"),
        Op::Run {
            command: Command::Shell("['a', 'b']".into()),
            network: false,
            mounts: vec![],
        }
    );
    assert_eq!(
        steps("run --network=default true")[0].text,
        "RUN --network=default true"
    );
}

#[test]
fn pkg_lists_packages() {
    assert_eq!(
        op("PKG nginx  py311-certbot"),
        Op::Pkg {
            packages: strings(&["nginx", "py311-certbot"]),
            bootstrap: true,
            scripts: None,
        }
    );
    assert_eq!(
        op("PKG --no-bootstrap nginx"),
        Op::Pkg {
            packages: strings(&["nginx"]),
            bootstrap: false,
            scripts: None,
        }
    );
    assert_eq!(
        op("ARG EXTRA=\"curl git\"\nPKG nginx $EXTRA"),
        Op::Pkg {
            packages: strings(&["nginx", "curl", "git"]),
            bootstrap: true,
            scripts: None,
        }
    );
    assert_eq!(
        op("PKG --scripts=defer --no-bootstrap fontconfig"),
        Op::Pkg {
            packages: strings(&["fontconfig"]),
            bootstrap: false,
            scripts: Some(PkgScripts::Defer),
        }
    );
    assert_eq!(
        op("ARG MODE=refuse\nPKG --scripts=$MODE nginx"),
        Op::Pkg {
            packages: strings(&["nginx"]),
            bootstrap: true,
            scripts: Some(PkgScripts::Refuse),
        }
    );
}

#[test]
fn copy_forms() {
    let s = steps("COPY --chown=www:www --chmod=0640 site/ /usr/local/www/");
    assert_eq!(
        s[0].op,
        Op::Copy(CopyOp {
            from: None,
            sources: vec![CopySource::Path("site/".into())],
            dest: "/usr/local/www/".into(),
            chown: Some("www:www".into()),
            chmod: Some(0o640),
            parents: false,
            exclude: vec![],
        })
    );
    assert_eq!(
        s[0].text,
        "COPY --chown=www:www --chmod=0640 site/ /usr/local/www/"
    );
    let Op::Copy(CopyOp { sources, dest, .. }) = op("COPY [\"my file\", \"b\", \"/dst dir/\"]")
    else {
        panic!()
    };
    assert_eq!(
        sources,
        [
            CopySource::Path("my file".into()),
            CopySource::Path("b".into())
        ]
    );
    assert_eq!(dest, "/dst dir/");
    let Op::Copy(CopyOp { sources, .. }) = op("COPY \"a b\" 'c d' *.conf /etc/") else {
        panic!()
    };
    assert_eq!(sources.len(), 3);
}

#[test]
fn copy_from_stage_index_and_image() {
    let b = build(
        "FROM scratch AS build\nFROM scratch\nCOPY --from=build /a /a\nCOPY --from=0 /b /b\n\
         COPY --from=nginx:1.25 /c /c\nCOPY --from=BUILD /d /d\nCOPY --from=ghcr.io/x/y /e /e",
    );
    let froms: Vec<Option<CopyFrom>> = b.stages[1]
        .steps
        .iter()
        .map(|s| match &s.op {
            Op::Copy(CopyOp { from, .. }) => from.clone(),
            _ => panic!(),
        })
        .collect();
    assert_eq!(
        froms,
        [
            Some(CopyFrom::Stage(0)),
            Some(CopyFrom::Stage(0)),
            Some(CopyFrom::Image("nginx:1.25".into())),
            Some(CopyFrom::Stage(0)),
            Some(CopyFrom::Image("ghcr.io/x/y".into())),
        ]
    );
}

#[test]
fn sysrc_service_lif() {
    assert_eq!(
        op("SYSRC nginx_enable=YES"),
        Op::Sysrc {
            file: "/etc/rc.conf".into(),
            name: "nginx_enable".into(),
            op: SysrcOp::Set,
            value: "YES".into()
        }
    );
    assert_eq!(
        op("SYSRC -f /etc/rc.conf.local ifconfig_lo0+=\"alias 10.0.0.1\""),
        Op::Sysrc {
            file: "/etc/rc.conf.local".into(),
            name: "ifconfig_lo0".into(),
            op: SysrcOp::Append,
            value: "alias 10.0.0.1".into()
        }
    );
    assert_eq!(
        op("SYSRC cloned_interfaces-=lo1"),
        Op::Sysrc {
            file: "/etc/rc.conf".into(),
            name: "cloned_interfaces".into(),
            op: SysrcOp::Remove,
            value: "lo1".into()
        }
    );
    assert_eq!(
        op("SYSRC x="),
        Op::Sysrc {
            file: "/etc/rc.conf".into(),
            name: "x".into(),
            op: SysrcOp::Set,
            value: String::new()
        }
    );
    for (action, enable) in [
        ("enable", true),
        ("ON", true),
        ("yes", true),
        ("disable", false),
        ("off", false),
        ("No", false),
    ] {
        assert_eq!(
            op(&format!("SERVICE nginx {action}")),
            Op::Service {
                name: "nginx".into(),
                enable
            }
        );
    }
    let want = Op::LineInFile {
        line: "nameserver 10.0.0.1".into(),
        file: "/etc/resolv.conf".into(),
    };
    assert_eq!(
        op("LINE_IN_FILE \"nameserver 10.0.0.1\" /etc/resolv.conf"),
        want
    );
    assert_eq!(op("lif 'nameserver 10.0.0.1' /etc/resolv.conf"), want);
    assert!(steps("LIF \"a\" /b")[0].text.starts_with("LINE_IN_FILE "));
}

#[test]
fn render_sees_args_and_env() {
    let o = ops("ARG DOMAIN=example.org\nARG UNSET\nENV PORT=8080 DOMAIN=env.example\nRENDER /usr/local/etc/nginx/");
    assert_eq!(
        o[1],
        Op::Render {
            path: "/usr/local/etc/nginx/".into(),
            vars: BTreeMap::from([
                ("DOMAIN".into(), "env.example".into()),
                ("PORT".into(), "8080".into())
            ]),
        }
    );
}

#[test]
fn jail_parameters() {
    assert_eq!(
        op("JAIL allow.raw_sockets host.hostname=web exec.start=\"/bin/sh /etc/rc\""),
        Op::Jail(pairs(&[
            ("allow.raw_sockets", ""),
            ("host.hostname", "web"),
            ("exec.start", "/bin/sh /etc/rc")
        ]))
    );
}

#[test]
fn user_workdir() {
    assert_eq!(op("USER www:www"), Op::User("www:www".into()));
    let o = ops("WORKDIR /usr/local\nWORKDIR etc/./nginx/\nWORKDIR ../..\nWORKDIR \"/a b\"\nWORKDIR /x/../../y");
    let dirs: Vec<Op> = [
        "/usr/local",
        "/usr/local/etc/nginx",
        "/usr/local",
        "/a b",
        "/y",
    ]
    .iter()
    .map(|d| Op::Workdir(d.to_string()))
    .collect();
    assert_eq!(o, dirs);
    assert_eq!(op("WORKDIR rel"), Op::Workdir("/rel".into()));
    // A stage built on another starts in its working directory.
    let b = build("FROM scratch AS a\nWORKDIR /srv\nFROM a\nWORKDIR app");
    assert_eq!(b.stages[1].steps[0].op, Op::Workdir("/srv/app".into()));
}

#[test]
fn expose_volume() {
    assert_eq!(
        op("EXPOSE 80 443/tcp 53/UDP 80/tcp 9000-9001/sctp"),
        Op::Expose(strings(&[
            "80/tcp",
            "443/tcp",
            "53/udp",
            "9000/sctp",
            "9001/sctp"
        ]))
    );
    assert_eq!(
        op("VOLUME /var/db /var/log"),
        Op::Volume(strings(&["/var/db", "/var/log"]))
    );
    assert_eq!(
        ops("ENV D=/data\nVOLUME [\"$D\", \"/var/log\"]")[1],
        Op::Volume(strings(&["/data", "/var/log"]))
    );
}

#[test]
fn cmd_entrypoint() {
    assert_eq!(
        op("CMD [\"nginx\", \"-g\", \"daemon off;\"]"),
        Op::Cmd(Command::Exec(strings(&["nginx", "-g", "daemon off;"])))
    );
    assert_eq!(
        op("CMD nginx -g 'daemon off;' $X"),
        Op::Cmd(Command::Shell("nginx -g 'daemon off;' $X".into()))
    );
    assert_eq!(op("CMD []"), Op::Cmd(Command::Exec(vec![])));
    assert_eq!(
        op("ENTRYPOINT [\"/usr/local/bin/app\"]"),
        Op::Entrypoint(Command::Exec(strings(&["/usr/local/bin/app"])))
    );
    assert_eq!(
        op("ENTRYPOINT exec /app"),
        Op::Entrypoint(Command::Shell("exec /app".into()))
    );
}

#[test]
fn keywords_are_case_insensitive_and_text_is_normalised() {
    let s = steps("copy a /b\nEnv X=1\npkg nginx");
    let texts: Vec<&str> = s.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["COPY a /b", "ENV X=1", "PKG nginx"]);
}

#[test]
fn changes_filesystem_matches_the_instruction() {
    let o = ops("RUN true\nENV A=1\nCOPY a /b\nEXPOSE 80");
    let layers: Vec<bool> = o.iter().map(Op::changes_filesystem).collect();
    assert_eq!(layers, [true, false, true, false]);
}

#[test]
fn a_whole_port_range_is_cheap() {
    let Op::Expose(p) = op("EXPOSE 1-65535/udp 80") else {
        panic!()
    };
    assert_eq!(
        (p.len(), p[0].as_str(), p[65535].as_str()),
        (65536, "1/udp", "80/tcp")
    );
}

#[test]
fn run_mounts_in_buildkit_syntax() {
    use jbuild::jailfile::{CopyFrom, MountKind, RunMount, Sharing};
    let b = build(
        "FROM scratch AS builder\nFROM scratch\nARG DIR=/var/cache/x\n\
         RUN --network=host --mount=type=secret,id=tok --mount=type=secret,id=k,dst=/k,required,mode=0440,uid=1,gid=2 \\\n\
             --mount=type=cache,target=$DIR,sharing=locked --mount=type=cache,id=npm,target=/n/./m/,mode=0700 \\\n\
             --mount=type=tmpfs,target=/tmp,size=64m --mount=type=bind,target=/src \\\n\
             --mount=type=bind,from=builder,source=/out/,target=/in,rw make",
    );
    let Op::Run {
        command,
        network,
        mounts,
    } = &b.stages[1].steps[0].op
    else {
        panic!("{b:?}")
    };
    assert_eq!(command, &Command::Shell("make".into()));
    assert!(network);
    let at = |target: &str, kind| RunMount {
        target: target.into(),
        kind,
    };
    assert_eq!(
        mounts,
        &vec![
            at(
                "/run/secrets/tok",
                MountKind::Secret {
                    id: "tok".into(),
                    required: false,
                    mode: 0o400,
                    uid: 0,
                    gid: 0
                }
            ),
            at(
                "/k",
                MountKind::Secret {
                    id: "k".into(),
                    required: true,
                    mode: 0o440,
                    uid: 1,
                    gid: 2
                }
            ),
            at(
                "/var/cache/x",
                MountKind::Cache {
                    id: "/var/cache/x".into(),
                    sharing: Sharing::Locked,
                    mode: 0o755,
                    uid: 0,
                    gid: 0
                }
            ),
            at(
                "/n/m",
                MountKind::Cache {
                    id: "npm".into(),
                    sharing: Sharing::Shared,
                    mode: 0o700,
                    uid: 0,
                    gid: 0
                }
            ),
            at(
                "/tmp",
                MountKind::Tmpfs {
                    size: Some(64 << 20)
                }
            ),
            at(
                "/src",
                MountKind::Bind {
                    from: None,
                    source: ".".into(),
                    rw: false
                }
            ),
            at(
                "/in",
                MountKind::Bind {
                    from: Some(CopyFrom::Stage(0)),
                    source: "out".into(),
                    rw: true
                }
            ),
        ]
    );
}

#[test]
fn the_instructions_docker_and_podman_accept() {
    use jbuild::jailfile::Healthcheck;
    let o = ops("ARG SIG=SIGQUIT\nSTOPSIGNAL $SIG\nSTOPSIGNAL 2\n\
         HEALTHCHECK --interval=1m --retries=2 CMD curl -f http://localhost/ || exit 1\n\
         HEALTHCHECK NONE\n\
         SHELL [\"/bin/csh\", \"-c\"]\n\
         ONBUILD RUN make $TARGET\n\
         MAINTAINER Jane <jane@example.org>\n\
         COPY --link --parents --exclude=*.o --exclude=$SIG src/./lib /dst/");
    assert_eq!(
        o,
        [
            Op::StopSignal("SIGQUIT".into()),
            Op::StopSignal("2".into()),
            Op::Healthcheck(Healthcheck {
                test: strings(&["CMD-SHELL", "curl -f http://localhost/ || exit 1"]),
                interval: Some(60_000_000_000),
                retries: Some(2),
                ..Healthcheck::default()
            }),
            Op::Healthcheck(Healthcheck {
                test: strings(&["NONE"]),
                ..Healthcheck::default()
            }),
            Op::Shell(strings(&["/bin/csh", "-c"])),
            Op::Onbuild("RUN make $TARGET".into()),
            Op::Label(pairs(&[(
                "org.opencontainers.image.authors",
                "Jane <jane@example.org>"
            )])),
            Op::Copy(CopyOp {
                from: None,
                sources: vec![CopySource::Path("src/./lib".into())],
                dest: "/dst/".into(),
                chown: None,
                chmod: None,
                parents: true,
                exclude: strings(&["*.o", "SIGQUIT"]),
            }),
        ]
    );
    let b = build("FROM scratch\nMAINTAINER me\n");
    assert_eq!(b.warnings.len(), 1, "{:?}", b.warnings);
    assert!(b.warnings[0].contains("Jailfile:2:1: MaintainerDeprecated"));
}
