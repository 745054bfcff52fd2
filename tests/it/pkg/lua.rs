//! Package Lua scripts (`jbuild::pkg::lua`): the `@sample` keyword's
//! behaviour both ways, pkg's API and globals, and the sandbox: paths stay
//! inside the root, the host's programs and files are out of reach, and a
//! script that does not end is stopped.
//!
//! The `@sample` scripts below are written from what the ports tree's
//! `Keywords/sample.ucl` is published to do (post-install: copy
//! `foo.sample` to `foo` when `foo` is absent; pre-deinstall: remove `foo`
//! when it still matches the sample, else say it is kept).

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use jbuild::blame::Blame;
use jbuild::pkg::lua::{run, Limits, LuaError, Message, ScriptEnv, Stream};

fn env(script: &str) -> ScriptEnv {
    ScriptEnv {
        package: "demo".into(),
        prefix: "/usr/local".into(),
        script: script.into(),
        upgrade: false,
    }
}

fn small() -> Limits {
    Limits {
        instructions: 2_000_000,
        memory: 8 << 20,
        time: Duration::from_secs(20),
    }
}

/// `args` as pkg's `-- args:` line; the rest is the keyword's logic.
fn sample_post_install(args: &str) -> String {
    format!(
        "-- args: {args}\n\
         local sample = pkg.prefixed_path(arg[1])\n\
         local target = arg[2] and pkg.prefixed_path(arg[2]) or (sample:gsub('%.sample$', ''))\n\
         if not pkg.stat(target) then pkg.copy(sample, target) end\n"
    )
}

fn sample_pre_deinstall(args: &str) -> String {
    format!(
        "-- args: {args}\n\
         local sample = pkg.prefixed_path(arg[1])\n\
         local target = arg[2] and pkg.prefixed_path(arg[2]) or (sample:gsub('%.sample$', ''))\n\
         if pkg.filecmp(sample, target) == 0 then\n\
           os.remove(target)\n\
         else\n\
           pkg.print_msg('You may need to manually remove ' .. target .. ' if it is no longer needed.')\n\
         end\n"
    )
}

/// A root with `/usr/local/etc/foo.conf.sample` (mode 0640, an old mtime).
fn root_with_sample() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let etc = t.path().join("root/usr/local/etc");
    fs::create_dir_all(&etc).unwrap();
    let sample = etc.join("foo.conf.sample");
    fs::write(&sample, "listen 80\n").unwrap();
    fs::set_permissions(&sample, fs::Permissions::from_mode(0o640)).unwrap();
    filetime::set_file_mtime(&sample, filetime::FileTime::from_unix_time(1_000_000, 0)).unwrap();
    let root = t.path().join("root");
    (t, root)
}

#[test]
fn sample_copies_the_sample_when_the_file_is_absent_and_keeps_a_present_one() {
    let (_t, root) = root_with_sample();
    let target = root.join("usr/local/etc/foo.conf");
    let script = sample_post_install("etc/foo.conf.sample");

    // Within the bounds docs/packages.md gives an @sample.
    let tight = Limits {
        instructions: 10_000,
        memory: 1 << 20,
        time: Duration::from_secs(20),
    };
    let msgs = run(&root, &script, &env("post-install"), tight).unwrap();
    assert!(msgs.is_empty(), "{msgs:?}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "listen 80\n");
    let (m, s) = (
        fs::metadata(&target).unwrap(),
        fs::metadata(root.join("usr/local/etc/foo.conf.sample")).unwrap(),
    );
    assert_eq!(m.mode() & 0o7777, 0o640, "the sample's mode");
    assert_eq!(m.mtime(), s.mtime(), "the sample's times");
    assert_eq!((m.uid(), m.gid()), (s.uid(), s.gid()));

    // Installed again (an upgrade): the user's edit stays.
    fs::write(&target, "listen 8080\n").unwrap();
    let mut up = env("post-install");
    up.upgrade = true;
    run(&root, &script, &up, small()).unwrap();
    assert_eq!(fs::read_to_string(&target).unwrap(), "listen 8080\n");

    // The two-argument form names the target.
    let script = sample_post_install("etc/foo.conf.sample etc/other.conf");
    run(&root, &script, &env("post-install"), small()).unwrap();
    assert_eq!(
        fs::read_to_string(root.join("usr/local/etc/other.conf")).unwrap(),
        "listen 80\n"
    );
}

#[test]
fn sample_removes_an_unchanged_copy_on_deinstall_and_keeps_a_changed_one() {
    let (_t, root) = root_with_sample();
    let target = root.join("usr/local/etc/foo.conf");
    let args = "etc/foo.conf.sample";
    run(
        &root,
        &sample_post_install(args),
        &env("post-install"),
        small(),
    )
    .unwrap();

    let msgs = run(
        &root,
        &sample_pre_deinstall(args),
        &env("pre-deinstall"),
        small(),
    )
    .unwrap();
    assert!(msgs.is_empty(), "{msgs:?}");
    assert!(!target.exists(), "the unchanged copy is removed");

    run(
        &root,
        &sample_post_install(args),
        &env("post-install"),
        small(),
    )
    .unwrap();
    fs::write(&target, "listen 8080\n").unwrap();
    let msgs = run(
        &root,
        &sample_pre_deinstall(args),
        &env("pre-deinstall"),
        small(),
    )
    .unwrap();
    assert_eq!(
        msgs,
        [Message {
            stream: Stream::Message,
            text:
                "You may need to manually remove /usr/local/etc/foo.conf if it is no longer needed."
                    .into()
        }]
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "listen 8080\n");
}

#[test]
fn the_globals_and_the_api_answer_as_pkgs_do() {
    let (_t, root) = root_with_sample();
    fs::create_dir_all(root.join("d/sub")).unwrap();
    fs::write(root.join("d/b"), "x").unwrap();
    fs::write(root.join("d/a"), "y").unwrap();
    let script = r#"
        print(pkg_name, pkg_prefix, pkg_rootdir, tostring(pkg_upgrade))
        local s = pkg.stat("/usr/local/etc/foo.conf.sample")
        io.write(s.type, " ", s.size, "\n")
        assert(pkg.stat("/nowhere") == nil)
        assert(pkg.stat("/d").type == "dir")
        assert(table.concat(pkg.readdir("/d"), ",") == "a,b,sub")
        assert(pkg.filecmp("/d/a", "/d/b") == 1)
        assert(pkg.filecmp("/d/a", "/d/a") == 0)
        assert(pkg.filecmp("/d/a", "/missing") == 2)
        assert(pkg.copy("/d/a", "/d/b") == 2, "copy never replaces")
        assert(pkg.copy("/missing", "/d/c") == 2)
        assert(pkg.prefixed_path("/abs") == "/abs")
        assert(pkg.symlink("/usr/local/etc", "/d/link"))
        assert(pkg.stat("/d/link").type == "lnk")
        local f = assert(io.open("/d/new", "w")) f:write("made") f:close()
        for line in io.lines("/d/new") do pkg.print_msg("read " .. line) end
        assert(os.rename("/d/new", "/d/renamed"))
        assert(os.remove("/d/renamed"))
        assert(os.remove("/d/never-there"), "pkg: removing nothing succeeds")
        local ok, msg = io.open("/d/missing")
        assert(ok == nil and msg == "/d/missing: No such file or directory", msg)
        assert(os.getenv("HOME") == nil)
        io.stderr:write("warning\n")
    "#;
    let msgs = run(&root, script, &env("post-install"), small()).unwrap();
    let text: Vec<_> = msgs.iter().map(|m| (m.stream, m.text.as_str())).collect();
    assert_eq!(
        text,
        [
            (Stream::Stdout, "demo\t/usr/local\t/\tfalse"),
            (Stream::Stdout, "reg 10"),
            (Stream::Message, "read made"),
            (Stream::Stderr, "warning"),
        ]
    );
    assert_eq!(
        fs::read_link(root.join("d/link")).unwrap(),
        Path::new("/usr/local/etc")
    );
}

#[test]
fn a_non_zero_return_or_an_error_fails_the_script_naming_the_package() {
    let (_t, root) = root_with_sample();
    let e = run(&root, "return 1", &env("post-install"), small()).unwrap_err();
    assert!(matches!(e, LuaError::Returned { .. }), "{e}");
    run(&root, "return 0", &env("post-install"), small()).unwrap();
    let e = run(&root, "error('boom')", &env("pre-install"), small()).unwrap_err();
    assert!(e.is_user_error());
    let text = e.to_string();
    assert!(
        text.contains("package `demo`") && text.contains("pre-install") && text.contains("boom"),
        "{text}"
    );
}

/// Scripts that climb out with `..`: refused, even when they catch the
/// error, and nothing outside the root is touched.
#[test]
fn paths_climbing_out_of_the_root_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("a/b/root");
    fs::create_dir_all(&root).unwrap();
    let outside = t.path().join("a/secret");
    fs::write(&outside, "host").unwrap();
    for script in [
        "io.open('../secret', 'w'):write('x')",
        "pcall(io.open, '/../../secret', 'w')",
        "pcall(os.remove, '../../secret')",
        "pkg.copy('/etc/../../secret', '/stolen')",
        "pcall(pkg.readdir, '..')",
        "pcall(pkg.symlink, '/x', '../../made')",
    ] {
        let e = run(&root, script, &env("post-install"), small()).unwrap_err();
        assert!(matches!(e, LuaError::Escape { .. }), "{script}: {e}");
        assert!(e.to_string().contains("outside the image's root"), "{e}");
    }
    assert_eq!(fs::read_to_string(&outside).unwrap(), "host");
    assert!(!root.join("stolen").exists());
    assert!(!t.path().join("a/made").exists());
}

/// Symlinks are followed as the jail follows them: an absolute target
/// starts again at the root, `..` stops there, so what a link names on
/// the host is never read nor written.
#[test]
fn symlinks_never_lead_out_of_the_root() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    fs::create_dir_all(root.join("etc")).unwrap();
    let host = t.path().join("host.conf");
    fs::write(&host, "host\n").unwrap();
    symlink("/", root.join("slash")).unwrap();
    symlink("../../../../../../..", root.join("up")).unwrap();
    symlink(&host, root.join("etc/direct")).unwrap();
    let host_in_root = |p: &Path| root.join(p.strip_prefix("/").unwrap());
    fs::create_dir_all(host_in_root(t.path())).unwrap();
    fs::write(host_in_root(&host), "image\n").unwrap();

    let script = format!(
        r#"
        assert(io.open("/etc/direct"):read("a") == "image\n", "the image's file")
        assert(io.open("/up{h}"):read("a") == "image\n")
        local f = assert(io.open("/slash{h}", "w")) f:write("inside") f:close()
        assert(pkg.stat("/up{h}").size == 6)
        assert(pkg.copy("/etc/direct", "/etc/copy") == nil)
        assert(io.open("/etc/copy"):read("a") == "inside")
        assert(pkg.filecmp("/etc/direct", "/slash{h}") == 0)
        "#,
        h = host.display()
    );
    run(&root, &script, &env("post-install"), small()).unwrap();
    assert_eq!(
        fs::read_to_string(&host).unwrap(),
        "host\n",
        "host untouched"
    );
    assert_eq!(fs::read_to_string(host_in_root(&host)).unwrap(), "inside");

    // pkg.copy onto a symlink to the host file: never through it.
    symlink(&host, root.join("etc/trap")).unwrap();
    fs::write(root.join("etc/src"), "evil").unwrap();
    let r = run(
        &root,
        "assert(pkg.copy('/etc/src', '/etc/trap') == 2)",
        &env("x"),
        small(),
    );
    r.unwrap();
    assert_eq!(fs::read_to_string(&host).unwrap(), "host\n");
}

#[test]
fn the_hosts_programs_and_modules_are_refused_even_when_caught() {
    let t = tempfile::tempdir().unwrap();
    let marker = t.path().join("ran");
    for (script, what) in [
        (
            format!("os.execute('touch {}')", marker.display()),
            "os.execute",
        ),
        (
            format!("pcall(os.execute, 'touch {}')", marker.display()),
            "os.execute",
        ),
        (
            format!("io.popen('touch {}')", marker.display()),
            "io.popen",
        ),
        ("os.exit(0)".to_string(), "os.exit"),
        ("require('os')".to_string(), "require"),
        ("dofile('/etc/passwd')".to_string(), "dofile"),
        ("pcall(io.lines)".to_string(), "io.lines"),
        // Lua runs finalizers with hooks off: no limit could stop one.
        (
            "setmetatable({}, {__gc = function() while true do end end})".to_string(),
            "__gc",
        ),
    ] {
        let e = run(t.path(), &script, &env("post-install"), small()).unwrap_err();
        assert!(matches!(e, LuaError::Refused { .. }), "{script}: {e}");
        assert!(e.to_string().contains(what), "{e}");
    }
    assert!(!marker.exists(), "no host program ran");

    // pkg.exec names the command it cannot run.
    let e = run(
        t.path(),
        "pcall(pkg.exec, {'/usr/sbin/pw', 'useradd', 'www'})",
        &env("pre-install"),
        small(),
    )
    .unwrap_err();
    assert!(matches!(e, LuaError::Exec { .. }), "{e}");
    assert!(e.to_string().contains("`/usr/sbin/pw useradd www`"), "{e}");

    // A binary chunk is not loaded.
    let e = run(
        t.path(),
        "assert(load(string.dump(function() end)))",
        &env("post-install"),
        small(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("binary"), "{e}");
}

#[test]
fn a_script_that_does_not_end_is_stopped() {
    let t = tempfile::tempdir().unwrap();
    for script in [
        "while true do end",
        // Catching the stop does not outrun it.
        "while true do pcall(function() while true do end end) end",
        "while true do xpcall(function() while true do end end, function() while true do end end) end",
        "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
        "local t = {} for i = 1, 1e12 do t[i % 7] = i end",
    ] {
        let e = run(t.path(), script, &env("post-install"), small()).unwrap_err();
        assert!(
            matches!(e, LuaError::Limit { what: "Lua instructions", .. }),
            "{script}: {e}"
        );
        assert!(e.to_string().contains("package `demo`"), "{e}");
    }

    let e = run(
        t.path(),
        "local t = {} while true do t[#t + 1] = string.rep('x', 4096) .. #t end",
        &env("post-install"),
        small(),
    )
    .unwrap_err();
    assert!(matches!(e, LuaError::Limit { what: "memory", .. }), "{e}");

    let mut slow = small();
    slow.instructions = u64::MAX;
    slow.time = Duration::from_millis(300);
    let e = run(t.path(), "while true do end", &env("post-install"), slow).unwrap_err();
    assert!(matches!(e, LuaError::Limit { what: "time", .. }), "{e}");
}
