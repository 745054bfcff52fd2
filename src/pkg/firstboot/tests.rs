use super::*;

fn deferred(package: &str, command: &str, reason: Reason) -> Deferred {
    Deferred {
        package: package.into(),
        script: "post-install".into(),
        command: command.into(),
        reason,
    }
}

fn two() -> Vec<Deferred> {
    vec![
        deferred(
            "fontconfig-2.15.0",
            "/usr/local/bin/fc-cache -s",
            Reason::Rebuilder,
        ),
        deferred("odd-1", "frob --it 'x y' \"$HOME\"", Reason::Unknown),
    ]
}

#[test]
fn the_script_has_rcs_keyword_order_commands_and_removes_itself() {
    let text = script_text(&two());
    assert!(text.starts_with("#!/bin/sh\n"), "{text}");
    let header: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("# ") && l.contains(':'))
        .take(4)
        .collect();
    assert_eq!(
        header,
        [
            "# PROVIDE: jbuild_firstboot",
            "# REQUIRE: FILESYSTEMS ldconfig",
            "# BEFORE: LOGIN",
            "# KEYWORD: firstboot",
        ]
    );
    assert!(!text.contains("nojail"), "{text}");
    assert!(
        !text.contains("rcvar"),
        "a script without rcvar runs unconfigured: {text}"
    );
    let fc = text
        .find("'fontconfig-2.15.0' 'post-install' 'rebuilder' '/usr/local/bin/fc-cache -s'")
        .expect(&text);
    let odd = text
        .find(r#"'odd-1' 'post-install' 'unknown' 'frob --it '\''x y'\'' "$HOME"'"#)
        .expect(&text);
    let rm = text
        .find("\trm -f /usr/local/etc/rc.d/jbuild_firstboot\n")
        .expect(&text);
    assert!(fc < odd && odd < rm, "{text}");
    assert!(text.contains("\t/bin/sh -c \"$4\"\n"), "{text}");
    assert!(
        text.ends_with("load_rc_config $name\nrun_rc_command \"$1\"\n"),
        "{text}"
    );
}

#[test]
fn sh_reads_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    std::fs::write(&p, script_text(&two())).unwrap();
    let out = std::process::Command::new("sh")
        .arg("-n")
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_same_list_gives_the_same_bytes_and_reads_back() {
    assert_eq!(script_text(&two()), script_text(&two()));
    assert_eq!(parse(&script_text(&two())).unwrap(), two());
    assert_eq!(parse(&script_text(&[])).unwrap(), vec![]);
    let newline = vec![deferred("p-1", "printf 'a\nb' > /x", Reason::Unknown)];
    assert_eq!(parse(&script_text(&newline)).unwrap(), newline);
}

#[test]
fn writing_puts_the_script_and_the_sentinel_and_extends_in_order() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(write(root.path(), &[]).unwrap(), vec![]);
    assert!(!root.path().join("firstboot").exists());
    assert!(!root.path().join("usr").exists());
    let list = two();
    write(root.path(), &list[..1]).unwrap();
    let script = root.path().join("usr/local/etc/rc.d/jbuild_firstboot");
    let first = std::fs::read(&script).unwrap();
    assert_eq!(first, script_text(&list[..1]).as_bytes());
    let meta = std::fs::metadata(&script).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o555);
    let sentinel = std::fs::metadata(root.path().join("firstboot")).unwrap();
    assert!(sentinel.is_file() && sentinel.len() == 0);
    let all = write(root.path(), &list[1..]).unwrap();
    assert_eq!(all, list);
    assert_eq!(
        std::fs::read(&script).unwrap(),
        script_text(&list).as_bytes()
    );
    assert_eq!(read(root.path()).unwrap(), Some(list));
}

#[test]
fn a_script_that_is_not_ours_is_left_alone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("usr/local/etc/rc.d");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("jbuild_firstboot"), "#!/bin/sh\necho mine\n").unwrap();
    let e = write(root.path(), &two()).unwrap_err();
    assert!(matches!(e, FirstbootError::NotOurs { .. }), "{e}");
    assert!(e.to_string().contains(SCRIPT), "{e}");
    assert!(crate::blame::Blame::is_user_error(&e));
    assert_eq!(
        std::fs::read_to_string(dir.join("jbuild_firstboot")).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
}

#[test]
fn a_symlinked_usr_local_stays_in_the_root() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("usr")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("usr/local")).unwrap();
    // The link's absolute target is taken inside the root, as the jail would.
    let inside = root.path().join(outside.path().strip_prefix("/").unwrap());
    std::fs::create_dir_all(&inside).unwrap();
    write(root.path(), &two()).unwrap();
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
    assert!(inside.join("etc/rc.d/jbuild_firstboot").is_file());
}

#[test]
fn the_label_lists_the_commands_and_stays_bounded() {
    let v = label(&two());
    assert_eq!(v, label(&two()));
    assert_eq!(from_label(&v), Some((two(), 0)));
    let many: Vec<Deferred> = (0..2000)
        .map(|i| {
            deferred(
                &format!("p-{i}"),
                "/usr/local/bin/fc-cache -s",
                Reason::Rebuilder,
            )
        })
        .collect();
    let v = label(&many);
    assert!(v.len() <= MAX_LABEL_BYTES, "{}", v.len());
    let (kept, omitted) = from_label(&v).unwrap();
    assert!(!kept.is_empty() && kept.len() + omitted as usize == many.len());
    assert_eq!(kept[..], many[..kept.len()]);
    assert_eq!(from_label("not json"), None);
}
