use std::collections::BTreeMap;
use std::fs;

use super::*;

fn template(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = d.path().join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    d
}

fn opts() -> Options {
    Options {
        from: "freebsd:14.3-RELEASE".into(),
        ..Default::default()
    }
}

#[test]
fn every_instruction_translates_and_parses() {
    let d = template(&[
        (
            "Bastillefile",
            "ARG DOMAIN=\"example.org\"\nARG PORT=8080\nARG EXTRA=curl\nPKG nginx ${EXTRA}\nCP usr /\nCP etc/motd /etc/motd\n\
             SYSRC nginx_flags=\"-c /usr/local/etc/nginx/${DOMAIN}.conf\" other=1\nSERVICE nginx enable\n\
             LIF \"server ${DOMAIN}\" /etc/hosts.allow\nRENDER /usr/local/etc/nginx\n\
             CMD echo '${DOMAIN}' > /tmp/x && echo $HOME\nMOUNT /data usr/local/www/data nullfs rw 0 0\n\
             RDR tcp ${PORT} 80\nLIMITS memoryuse 1G\nCONFIG set allow.mlock 1\nCONFIG set allow.mount.procfs;\n\
             TAGS web prod\nRESTART\nSERVICE nginx start\n",
        ),
        ("usr/local/etc/nginx/nginx.conf", "server_name ${DOMAIN};\n"),
        ("etc/motd", "hi\n"),
    ]);
    let c = convert(d.path(), &opts()).unwrap();
    let build = c.load().unwrap_or_else(|e| panic!("{e}\n{}", c.jailfile));
    let texts: Vec<&str> = build.stages[0]
        .steps
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    let want = [
        "PKG nginx curl",
        "COPY usr/ /usr",
        "COPY etc/motd /etc/motd",
        "SYSRC nginx_flags=\"-c /usr/local/etc/nginx/example.org.conf\"",
        "SYSRC other=1",
        "SERVICE nginx enable",
        "LINE_IN_FILE \"server example.org\" /etc/hosts.allow",
        "RENDER /usr/local/etc/nginx",
        "VOLUME /usr/local/www/data",
        "EXPOSE 80/tcp",
        "JAIL allow.mlock=1",
        "JAIL allow.mount.procfs",
    ];
    for w in want {
        assert!(
            texts.iter().any(|t| t.contains(w)),
            "no step like `{w}` in {texts:#?}\n{}",
            c.jailfile
        );
    }
    // CMD: the text after ARG substitution, through /bin/sh -c, with network.
    let run = build.stages[0]
        .steps
        .iter()
        .find_map(|s| match &s.op {
            jailfile::Op::Run {
                command, network, ..
            } => Some((command.clone(), *network)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        run,
        (
            jailfile::Command::Exec(vec![
                "/bin/sh".into(),
                "-c".into(),
                // The ARG is the step's environment; in single quotes,
                // where Bastille's text substitution reaches and sh's does
                // not, the reference closes the quotes around it.
                "echo ''\"${DOMAIN}\"'' > /tmp/x && echo $HOME".into()
            ]),
            true
        )
    );
    let labels: Vec<(String, String)> = build.stages[0]
        .steps
        .iter()
        .filter_map(|s| match &s.op {
            jailfile::Op::Label(l) => Some(l.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    for (k, v) in [
        (
            "org.jbuild.fstab./usr/local/www/data",
            "/data /usr/local/www/data nullfs rw 0 0",
        ),
        ("org.jbuild.rdr.tcp.8080", "tcp 8080 80"),
        ("org.jbuild.rctl.memoryuse", "1G"),
        ("org.jbuild.tags", "web prod"),
    ] {
        assert!(
            labels.contains(&(k.into(), v.into())),
            "{k} missing in {labels:?}"
        );
    }
    // RENDER sees the unquoted ARG value.
    let render = build.stages[0]
        .steps
        .iter()
        .find_map(|s| match &s.op {
            jailfile::Op::Render { vars, .. } => Some(vars.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        render.get("DOMAIN").map(String::as_str),
        Some("example.org")
    );
    assert!(
        c.notes.iter().any(|n| n.contains("RESTART")),
        "{:?}",
        c.notes
    );
    assert!(
        c.notes.iter().any(|n| n.contains("nginx start")),
        "{:?}",
        c.notes
    );
}

#[test]
fn arg_precedence_is_cli_then_file_then_default() {
    let d = template(&[
        (
            "Bastillefile",
            "ARG A=def\nARG B=def\nARG C=def\nSYSRC a=${A} b=${B} c=${C}\n",
        ),
        ("args.env", "# values\nA=file\nB=file\n"),
    ]);
    let mut o = opts();
    o.args.insert("A".into(), "cli".into());
    o.arg_file = Some(d.path().join("args.env"));
    let c = convert(d.path(), &o).unwrap();
    let b = c.load().unwrap();
    let t: Vec<&str> = b.stages[0].steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(t, ["SYSRC a=cli", "SYSRC b=file", "SYSRC c=def"]);
}

#[test]
fn required_arg_missing_is_an_error_at_its_line() {
    let d = template(&[("Bastillefile", "PKG nginx\n\nARG+ DB_PASSWORD\n")]);
    let e = convert(d.path(), &opts()).unwrap_err();
    assert_eq!((e.line, e.column), (3, 6), "{e}");
    let shown = e.to_string();
    assert!(shown.contains("required ARG `DB_PASSWORD`"), "{shown}");
    assert!(shown.contains("--arg DB_PASSWORD="), "{shown}");
    assert!(shown.contains("Bastillefile:3:6"), "{shown}");
    let mut o = opts();
    o.args.insert("DB_PASSWORD".into(), "s3cret".into());
    convert(d.path(), &o).unwrap().load().unwrap();
}

#[test]
fn malformed_lines_point_at_the_problem() {
    let cases = [
        ("PKG nginx\nRUNN echo\n", 2, 1, "unknown or unsupported"),
        ("SYSRC nginx_enable\n", 1, 7, "does not assign"),
        ("CP /etc/hosts /etc/hosts\n", 1, 4, "path on the host"),
        ("CP missing /etc/\n", 1, 4, "not in the template"),
        ("CP ../../etc/passwd /etc/\n", 1, 4, "leaves the template"),
        ("LIMITS memoryusage 1G\n", 1, 8, "not an rctl(8) resource"),
        ("RDR tcp 99999 80\n", 1, 9, "not a port"),
        ("SYSRC a=\"unclosed\nPKG x\n", 1, 9, "unbalanced quote"),
        ("LINE_IN_FILE only-one\n", 1, 14, "takes a line and a file"),
        ("INCLUDE acme/missing\n", 1, 9, "not found"),
        ("INCLUDE https://github.com/acme/web\n", 1, 9, "not found"),
        ("NETWORK add vtnet1 DHCP\n", 1, 1, "unsupported"),
        ("ARG A=1\nPKG ${A} ${EXTRA}\n", 2, 10, "not a declared ARG"),
    ];
    for (text, line, col, what) in cases {
        let d = template(&[("Bastillefile", text)]);
        let mut o = opts();
        o.templates_dir = Some(d.path().join("no-templates"));
        let e = convert(d.path(), &o).unwrap_err();
        assert_eq!((e.line, e.column), (line, col), "{text}: {e}");
        assert!(e.to_string().contains(what), "{text}: {e}");
        assert!(e.to_string().contains("Bastillefile:"), "{e}");
    }
    // A remote INCLUDE says to fetch it first.
    let d = template(&[("Bastillefile", "INCLUDE https://github.com/acme/web\n")]);
    let e = convert(d.path(), &opts()).unwrap_err();
    assert!(
        e.help.as_deref().unwrap_or("").contains("fetch it first"),
        "{e}"
    );
}

#[test]
fn jailfile_errors_are_shown_at_the_bastillefile_line() {
    // SERVICE names are checked by the Jailfile parser.
    let d = template(&[("Bastillefile", "PKG nginx\nSERVICE 'bad name' enable\n")]);
    let c = convert(d.path(), &opts()).unwrap();
    let e = c.load().unwrap_err();
    assert!(e.file.ends_with("Bastillefile"), "{e}");
    assert_eq!(e.line, 2, "{e}");
    assert!(
        e.help.as_deref().unwrap_or("").contains("translated to"),
        "{e}"
    );
}

#[test]
fn legacy_hook_files_are_read_after_the_bastillefile() {
    let d = template(&[
        ("PKG", "nginx\ncurl\n"),
        ("SYSRC", "nginx_enable=YES\n"),
        ("CMD", "echo one\necho two\n"),
        ("OVERLAY", "usr\n"),
        ("usr/local/x", "x"),
    ]);
    let c = convert(d.path(), &opts()).unwrap();
    let b = c.load().unwrap();
    let t: Vec<&str> = b.stages[0].steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(t[0], "PKG nginx curl");
    assert_eq!(t[1], "COPY usr/ /usr");
    assert_eq!(t[2], "SYSRC nginx_enable=YES");
    assert!(
        t[3].starts_with("RUN") && t[3].contains("echo one\\necho two"),
        "{t:?}"
    );
}

#[test]
fn include_cycles_are_refused() {
    let d = template(&[
        ("a/Bastillefile", "INCLUDE ../b\n"),
        ("b/Bastillefile", "PKG x\nINCLUDE ../a\n"),
    ]);
    let e = convert(&d.path().join("a"), &opts()).unwrap_err();
    assert!(e.file.ends_with("b/Bastillefile") && e.line == 2, "{e}");
    assert!(e.to_string().contains("already being included"), "{e}");
}

#[test]
fn without_from_the_base_is_a_build_arg() {
    let d = template(&[("Bastillefile", "PKG nginx\n")]);
    let c = convert(d.path(), &Options::default()).unwrap();
    assert!(
        c.jailfile.contains("ARG BASE\nFROM ${BASE}\n"),
        "{}",
        c.jailfile
    );
    let mut args = BTreeMap::new();
    args.insert("BASE".to_string(), "freebsd:14.3-RELEASE".to_string());
    let b = jailfile::load_str(&c.path, &c.jailfile, &args).unwrap();
    assert_eq!(
        b.stages[0].base,
        jailfile::Base::FreeBsdRelease("14.3-RELEASE".into())
    );
}

#[test]
fn service_actions_edit_rc_conf_run_as_steps_or_carry_the_started_services() {
    let d = template(&[(
        "Bastillefile",
        "PKG postgresql16-server\nSERVICE postgresql enable\nSERVICE postgresql initdb\n\
         SERVICE nginx configtest\nSERVICE postgresql start\nSERVICE nginx onerestart\n\
         SERVICE sshd keygen rsa\nSERVICE postgresql stop\nCMD echo 'it''s' \"${HOME}\"\n\
         SERVICE redis status\nSERVICE redis stop\n",
    )]);
    let c = convert(d.path(), &opts()).unwrap();
    let b = c.load().unwrap();
    let runs: Vec<(jailfile::Command, u32)> = b.stages[0]
        .steps
        .iter()
        .filter_map(|s| match &s.op {
            jailfile::Op::Run { command, .. } => {
                let at = c.origin(s.location.line).expect("from a Bastillefile line");
                Some((
                    command.clone(),
                    at.rsplit(':').next().unwrap().parse().unwrap(),
                ))
            }
            _ => None,
        })
        .collect();
    let sh = |s: &str| jailfile::Command::Exec(vec!["/bin/sh".into(), "-c".into(), s.into()]);
    let start = |s: &str| {
        format!(
            "{s} || {{ s=$?; echo 'jbuild: `{s}`, started for this step by an earlier SERVICE line, failed' >&2; exit $s; }}\n"
        )
    };
    assert_eq!(
        runs,
        [
            (sh("service postgresql initdb"), 3),
            (sh("service nginx configtest"), 4),
            // Both started services run for it, as in Bastille's live jail.
            (
                sh(&format!(
                    "{}{}/bin/sh -c 'service sshd keygen rsa'\n\
                     status=$?\n\
                     service nginx onestop\n\
                     service postgresql onestop\n\
                     exit $status",
                    start("service postgresql start"),
                    start("service nginx onerestart"),
                )),
                7
            ),
            // Stopped, postgresql no longer does; the script is one word.
            (
                sh(&format!(
                    "{}{}",
                    start("service nginx onerestart"),
                    r#"/bin/sh -c 'echo '\''it'\'''\''s'\'' "${HOME}"'
status=$?
service nginx onestop
exit $status"#
                )),
                9
            ),
        ]
    );
    assert!(b.stages[0]
        .steps
        .iter()
        .any(|s| s.text == "SERVICE postgresql enable"));
    let noted = |at: u32, words: &[&str]| {
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains(&format!("Bastillefile:{at}:"))
                    && words.iter().all(|w| n.contains(w))),
            "line {at}: {words:?} in {:?}",
            c.notes
        )
    };
    noted(5, &["postgresql start", "each later step", "when it boots"]);
    noted(6, &["nginx onerestart", "`service nginx onestop` after"]);
    noted(8, &["postgresql stop", "the later steps run without it"]);
    noted(10, &["redis status", "no service runs while building"]);
    noted(11, &["redis stop", "no service runs while building"]);
}

#[test]
fn include_category_template_resolves_in_the_including_templates_dir_then_templates_then_bastille_conf(
) {
    let d = template(&[
        // The templates directory the including template lives in.
        (
            "tpl/web/site/Bastillefile",
            "INCLUDE db/postgres\nINCLUDE lang/php\nINCLUDE base/motd\nPKG site\n",
        ),
        (
            "tpl/db/postgres/Bastillefile",
            "PKG postgresql16-server\nSERVICE postgresql initdb\n",
        ),
        // Only under --templates.
        ("extra/lang/php/Bastillefile", "PKG php83\n"),
        // Only in bastille.conf's templates directory; also in --templates'
        // under another category, which must not be taken.
        (
            "prefix/templates/base/motd/Bastillefile",
            "PKG motd-from-bastille-conf\n",
        ),
        ("extra/db/postgres/Bastillefile", "PKG wrong-postgres\n"),
        (
            "bastille.conf",
            "bastille_prefix=\"PREFIX\"\nbastille_templatesdir=\"${bastille_prefix}/templates\"\n",
        ),
    ]);
    let conf = d.path().join("bastille.conf");
    let text = fs::read_to_string(&conf).unwrap();
    fs::write(
        &conf,
        text.replace("PREFIX", d.path().join("prefix").to_str().unwrap()),
    )
    .unwrap();
    let mut o = opts();
    o.templates = Some(d.path().join("extra"));
    o.bastille_conf = Some(conf);
    let c = convert(&d.path().join("tpl/web/site"), &o).unwrap();
    let b = c.load().unwrap();
    let t: Vec<&str> = b.stages[0].steps.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(t[0], "PKG postgresql16-server");
    assert!(t[1].contains("service postgresql initdb"), "{t:?}");
    assert_eq!(
        t[2..],
        ["PKG php83", "PKG motd-from-bastille-conf", "PKG site"]
    );

    // None has it: the line, and every place tried.
    let d2 = template(&[("tpl/web/site/Bastillefile", "PKG a\nINCLUDE db/mysql\n")]);
    let mut o = opts();
    o.templates = Some(d2.path().join("extra"));
    o.templates_dir = Some(d2.path().join("configured"));
    let e = convert(&d2.path().join("tpl/web/site"), &o).unwrap_err();
    assert_eq!((e.line, e.column), (2, 9), "{e}");
    let shown = e.to_string();
    for place in ["tpl/db/mysql", "extra/db/mysql", "configured/db/mysql"] {
        let p = d2
            .path()
            .join(place)
            .canonicalize()
            .unwrap_or(d2.path().join(place));
        assert!(
            shown.contains(p.to_str().unwrap()) || shown.contains(place),
            "{place}: {shown}"
        );
    }
    assert!(
        e.help.as_deref().unwrap().contains("--templates DIR"),
        "{e}"
    );

    // Cycles across categories are refused at the line that closes them.
    let d3 = template(&[
        ("t/a/one/Bastillefile", "INCLUDE b/two\n"),
        ("t/b/two/Bastillefile", "PKG x\nINCLUDE a/one\n"),
    ]);
    let e = convert(&d3.path().join("t/a/one"), &opts()).unwrap_err();
    assert!(e.file.ends_with("b/two/Bastillefile") && e.line == 2, "{e}");
    assert!(e.to_string().contains("already being included"), "{e}");
}

#[test]
fn arg_references_stay_in_the_jailfile_and_take_build_args() {
    let d = template(&[(
        "Bastillefile",
        "ARG DOMAIN=\"example.org\"\nARG PORT=8080\nARG LISTEN=0.0.0.0:${PORT}\nARG+ DB_PASSWORD\n\
         ARG PKGS=nginx curl\nPKG ${PKGS}\nSYSRC nginx_flags=\"-c /usr/local/etc/nginx/${DOMAIN}.conf\"\n\
         LIF \"server ${DOMAIN}\" /etc/hosts.allow\nSYSRC app_listen=${LISTEN}\nRDR tcp ${PORT} ${PORT}\n\
         CMD echo ${DOMAIN} '${DOMAIN}' > /tmp/x && echo ${DB_PASSWORD}\nSYSRC db_pw=${DB_PASSWORD}\n",
    )]);
    let mut o = opts();
    o.leave_required = true;
    let c = convert(d.path(), &o).unwrap();
    let jf = &c.jailfile;
    for want in [
        "ARG DOMAIN=example.org\n",
        "ARG LISTEN=0.0.0.0:${PORT}\n",
        "ARG DB_PASSWORD=\"${DB_PASSWORD:?is a required ARG: give --build-arg DB_PASSWORD=VALUE}\"\n",
        // Bastille splits the value into two packages; so does this line.
        "PKG nginx curl\n",
        "SYSRC nginx_flags=\"-c /usr/local/etc/nginx/${DOMAIN}.conf\"\n",
        "LINE_IN_FILE \"server ${DOMAIN}\" /etc/hosts.allow\n",
        "SYSRC app_listen=${LISTEN}\n",
        "EXPOSE ${PORT}/tcp\n",
        // In single quotes sh would not expand a reference: it closes them.
        r#"["/bin/sh","-c","echo ${DOMAIN} ''\"${DOMAIN}\"'' > /tmp/x && echo ${DB_PASSWORD:?is a required ARG: give --build-arg DB_PASSWORD=VALUE}"]"#,
        "SYSRC db_pw=\"${DB_PASSWORD:?is a required ARG: give --build-arg DB_PASSWORD=VALUE}\"\n",
        "LABEL org.jbuild.rdr.tcp.${PORT}=\"tcp ${PORT} ${PORT}\"\n",
    ] {
        assert!(jf.contains(want), "no `{want}` in\n{jf}");
    }
    assert_eq!(c.required, ["DB_PASSWORD"]);
    // With build args, the Jailfile gives what the template gives with --arg.
    let steps =
        |b: &Build| -> Vec<String> { b.stages[0].steps.iter().map(|s| s.text.clone()).collect() };
    let mut args = BTreeMap::new();
    args.insert("PORT".to_string(), "9090".to_string());
    args.insert("DB_PASSWORD".to_string(), "pw".to_string());
    let printed = jailfile::load_str(&c.path, jf, &args).unwrap();
    let mut o = opts();
    o.args = args.clone();
    let direct = convert(d.path(), &o).unwrap();
    assert!(direct.required.is_empty());
    let direct = direct.load().unwrap();
    assert_eq!(steps(&printed), steps(&direct));
    assert!(steps(&printed).contains(&"SYSRC app_listen=0.0.0.0:9090".to_string()));
    // Without the required one, the printed Jailfile refuses to load and
    // says which to give.
    args.remove("DB_PASSWORD");
    let e = jailfile::load_str(&c.path, jf, &args).unwrap_err();
    assert!(
        e.to_string().contains("--build-arg DB_PASSWORD=VALUE"),
        "{e}"
    );
    // A build of the template still refuses at the ARG+ line.
    let e = convert(d.path(), &opts()).unwrap_err();
    assert_eq!(e.line, 4, "{e}");
}
