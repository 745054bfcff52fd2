//! `jbuild::pkg::accounts`: `pw` and `pwd_mkdb` on a root holding
//! FreeBSD's default `master.passwd` and `group` (written here in the
//! published files' form), as a USERS/GROUPS package script calls them.
//! The five files are checked as FreeBSD has them: text and modes, and
//! `pwd.db`/`spwd.db` read back by Debian's `db_dump185` and looked up
//! through libdb1's `get`, against records built here by a small encoder
//! written from pwd_mkdb(8)'s format (not by calling jbuild).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use jbuild::pkg::accounts::{pw::pw, pwd_mkdb::pwd_mkdb};
use jbuild::pkg::script::{CommandError, Io};

use super::dump185::{assert_found, pairs as dump, sorted};

const MASTER: &str = "\
# $FreeBSD$
#
root::0:0::0:0:Charlie &:/root:/bin/sh
toor:*:0:0::0:0:Bourne-again Superuser:/root:
daemon:*:1:1::0:0:Owner of many system processes:/root:/usr/sbin/nologin
operator:*:2:5::0:0:System &:/:/usr/sbin/nologin
bin:*:3:7::0:0:Binaries Commands and Source:/:/usr/sbin/nologin
tty:*:4:65533::0:0:Tty Sandbox:/:/usr/sbin/nologin
kmem:*:5:65533::0:0:KMem Sandbox:/:/usr/sbin/nologin
games:*:7:13::0:0:Games pseudo-user:/:/usr/sbin/nologin
news:*:8:8::0:0:News Subsystem:/:/usr/sbin/nologin
man:*:9:9::0:0:Mister Man Pages:/usr/share/man:/usr/sbin/nologin
sshd:*:22:22::0:0:Secure Shell Daemon:/var/empty:/usr/sbin/nologin
smmsp:*:25:25::0:0:Sendmail Submission User:/var/spool/clientmqueue:/usr/sbin/nologin
mailnull:*:26:26::0:0:Sendmail Default User:/var/spool/mqueue:/usr/sbin/nologin
bind:*:53:53::0:0:Bind Sandbox:/:/usr/sbin/nologin
unbound:*:59:59::0:0:Unbound DNS Resolver:/var/unbound:/usr/sbin/nologin
proxy:*:62:62::0:0:Packet Filter pseudo-user:/nonexistent:/usr/sbin/nologin
_pflogd:*:64:64::0:0:pflogd privsep user:/var/empty:/usr/sbin/nologin
_dhcp:*:65:65::0:0:dhcp programs:/var/empty:/usr/sbin/nologin
uucp:*:66:66::0:0:UUCP pseudo-user:/var/spool/uucppublic:/usr/local/libexec/uucp/uucico
pop:*:68:6::0:0:Post Office Owner:/nonexistent:/usr/sbin/nologin
auditdistd:*:78:77::0:0:Auditdistd unprivileged user:/var/empty:/usr/sbin/nologin
www:*:80:80::0:0:World Wide Web Owner:/nonexistent:/usr/sbin/nologin
ntpd:*:123:123::0:0:NTP Daemon:/var/db/ntp:/usr/sbin/nologin
_ypldap:*:160:160::0:0:YP LDAP unprivileged user:/var/empty:/usr/sbin/nologin
hast:*:845:845::0:0:HAST unprivileged user:/var/empty:/usr/sbin/nologin
tests:*:977:977::0:0:Unprivileged user for tests:/nonexistent:/usr/sbin/nologin
nobody:*:65534:65534::0:0:Unprivileged user:/nonexistent:/usr/sbin/nologin
";

const GROUP: &str = "\
# $FreeBSD$
#
wheel:*:0:root
daemon:*:1:
kmem:*:2:
sys:*:3:
tty:*:4:
operator:*:5:root
mail:*:6:
bin:*:7:
news:*:8:
man:*:9:
games:*:13:
ftp:*:14:
staff:*:20:
sshd:*:22:
smmsp:*:25:
mailnull:*:26:
guest:*:31:
video:*:44:
realtime:*:47:
bind:*:53:
unbound:*:59:
proxy:*:62:
authpf:*:63:
_pflogd:*:64:
_dhcp:*:65:
uucp:*:66:
dialer:*:68:
network:*:69:
audit:*:77:
www:*:80:
ntpd:*:123:
_ypldap:*:160:
hast:*:845:
tests:*:977:
nogroup:*:65533:
nobody:*:65534:
";

/// A root with FreeBSD's default accounts, `/var/mail` and a skeleton.
fn base() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let etc = t.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    std::fs::write(etc.join("master.passwd"), MASTER).unwrap();
    std::fs::write(etc.join("group"), GROUP).unwrap();
    std::fs::create_dir_all(t.path().join("var/mail")).unwrap();
    std::fs::create_dir_all(t.path().join("usr/share/skel")).unwrap();
    std::fs::write(t.path().join("usr/share/skel/dot.profile"), "PATH=/bin\n").unwrap();
    t
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

type Command = fn(&Path, &[String], &mut Io<'_>) -> Result<i32, CommandError>;

fn run_with(cmd: Command, root: &Path, line: &str) -> Result<Ran, CommandError> {
    let args: Vec<String> = shell_words(line);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = Io {
        stdin: b"",
        stdout: &mut out,
        stderr: &mut err,
    };
    let code = cmd(root, &args, &mut io)?;
    Ok(Ran {
        code,
        stdout: String::from_utf8(out).unwrap(),
        stderr: String::from_utf8(err).unwrap(),
    })
}

fn run(root: &Path, line: &str) -> Ran {
    run_with(pw, root, line).unwrap()
}

/// Words split at blanks, `"…"` kept together (enough for these lines).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

/// The USERS/GROUPS template's calls for redis and git_daemon, and a
/// member added to www.
fn users_template(root: &Path) {
    for line in [
        "groupadd redis -g 535",
        "useradd redis -u 535 -g 535 -c \"Redis Database Server\" -d /var/db/redis -s /usr/sbin/nologin",
        "-R / useradd -n git_daemon -d /nonexistent -s /usr/sbin/nologin -c \"git daemon\"",
        "groupmod www -m git_daemon",
    ] {
        let r = run(root, line);
        assert_eq!(r.code, 0, "pw {line}: {}", r.stderr);
        assert_eq!(r.stderr, "", "pw {line}");
    }
}

// ---- the test's own encoder, from pwd_mkdb(8) and pw_scan.c ----

/// `__pw_scan`'s bits for each non-empty field of a 10-field line.
fn fields_of(f: &[&str]) -> u32 {
    // name passwd uid gid class change expire gecos dir shell
    let bits = [0x1, 0x2, 0x4, 0x8, 0x20, 0x10, 0x200, 0x40, 0x80, 0x100];
    f.iter()
        .zip(bits)
        .filter(|(v, _)| !v.is_empty())
        .map(|(_, b)| b)
        .sum()
}

fn record(f: &[&str], secure: bool) -> Vec<u8> {
    let num = |s: &str| s.parse::<u32>().unwrap_or(0).to_be_bytes();
    let mut r = Vec::new();
    let s = |r: &mut Vec<u8>, t: &str| {
        r.extend_from_slice(t.as_bytes());
        r.push(0)
    };
    s(&mut r, f[0]);
    s(&mut r, if secure { f[1] } else { "*" });
    r.extend_from_slice(&num(f[2]));
    r.extend_from_slice(&num(f[3]));
    r.extend_from_slice(&num(f[5]));
    s(&mut r, f[4]);
    s(&mut r, f[7]);
    s(&mut r, f[8]);
    s(&mut r, f[9]);
    r.extend_from_slice(&num(f[6]));
    r.extend_from_slice(&fields_of(f).to_be_bytes());
    r
}

/// Every (key, data) pair pwd_mkdb puts in pwd.db (or spwd.db).
fn expected(master: &str, secure: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = vec![(b"\xffVERSION".to_vec(), vec![4u8])];
    let mut names = std::collections::HashSet::new();
    let mut uids = std::collections::HashSet::new();
    let mut n = 0u32;
    for line in master.lines() {
        let t = line.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        n += 1;
        let f: Vec<&str> = line.split(':').collect();
        let rec = record(&f, secure);
        if names.insert(f[0].to_string()) {
            out.push(([b"A", f[0].as_bytes()].concat(), rec.clone()));
        }
        out.push(([&b"B"[..], &n.to_be_bytes()].concat(), rec.clone()));
        let uid: u32 = f[2].parse().unwrap();
        if uids.insert(uid) {
            out.push(([&b"C"[..], &uid.to_be_bytes()].concat(), rec));
        }
    }
    out
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

const REDIS: &str = "redis:*:535:535::0:0:Redis Database Server:/var/db/redis:/usr/sbin/nologin";
const GIT: &str = "git_daemon:*:1000:1000::0:0:git daemon:/nonexistent:/usr/sbin/nologin";

#[test]
fn the_users_template_writes_the_five_files_as_freebsd_has_them() {
    let t = base();
    let root = t.path();
    users_template(root);
    let etc = root.join("etc");

    let master = std::fs::read_to_string(etc.join("master.passwd")).unwrap();
    assert_eq!(master, format!("{MASTER}{REDIS}\n{GIT}\n"));
    let group = std::fs::read_to_string(etc.join("group")).unwrap();
    let want_group = GROUP.replace("www:*:80:\n", "www:*:80:git_daemon\n")
        + "redis:*:535:\ngit_daemon:*:1000:\n";
    assert_eq!(group, want_group);
    let passwd = std::fs::read_to_string(etc.join("passwd")).unwrap();
    assert!(
        passwd.starts_with(
            "root:*:0:0:Charlie &:/root:/bin/sh\ntoor:*:0:0:Bourne-again Superuser:/root:\n"
        ),
        "{passwd}"
    );
    assert!(passwd.ends_with("redis:*:535:535:Redis Database Server:/var/db/redis:/usr/sbin/nologin\ngit_daemon:*:1000:1000:git daemon:/nonexistent:/usr/sbin/nologin\n"));
    assert!(!passwd.contains('#'));

    for (file, m) in [
        ("master.passwd", 0o600),
        ("spwd.db", 0o600),
        ("passwd", 0o644),
        ("group", 0o644),
        ("pwd.db", 0o644),
    ] {
        assert_eq!(mode(&etc.join(file)), m, "{file}");
    }

    for (file, secure) in [("pwd.db", false), ("spwd.db", true)] {
        let want = expected(&master, secure);
        let path = etc.join(file);
        assert_eq!(sorted(dump(&path)), sorted(want.clone()), "{file}");
        assert_found(&path, &want);
    }
    // The uid-0 key is root's (the first line), not toor's; pwd.db has `*`
    // for root's empty password and spwd.db the password itself.
    let pwd = dump(&etc.join("pwd.db"));
    let uid0 = pwd.iter().find(|(k, _)| k == b"C\0\0\0\0").unwrap();
    assert!(uid0.1.starts_with(b"root\0*\0"));
    let spwd = dump(&etc.join("spwd.db"));
    let redis = spwd.iter().find(|(k, _)| k == b"Aredis").unwrap();
    assert!(redis.1.starts_with(b"redis\0*\0\0\0\x02\x17\0\0\x02\x17"));
    assert!(redis.1.ends_with(&0x3dfu32.to_be_bytes()));
    let root_s = spwd.iter().find(|(k, _)| k == b"Aroot").unwrap();
    assert!(
        root_s.1.starts_with(b"root\0\0"),
        "root's empty password kept"
    );

    // The mail file pw makes for a new user, the user's.
    let mail = root.join("var/mail/redis");
    assert_eq!(mode(&mail), 0o600);
    assert_eq!(std::fs::metadata(&mail).unwrap().uid(), 535);
}

#[test]
fn show_and_the_existing_and_missing_paths_exit_as_pw() {
    let t = base();
    let root = t.path();
    users_template(root);
    let r = run(root, "usershow redis");
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, format!("{REDIS}\n").as_str())
    );
    let r = run(root, "-R / groupshow www");
    assert_eq!((r.code, r.stdout.as_str()), (0, "www:*:80:git_daemon\n"));
    let r = run(root, "group show 535");
    assert_eq!((r.code, r.stdout.as_str()), (0, "redis:*:535:\n"));
    let r = run(root, "usershow -a");
    assert_eq!(r.stdout.lines().count(), 29);

    let before = std::fs::read(root.join("etc/pwd.db")).unwrap();
    for (line, code, msg) in [
        (
            "groupadd redis -g 999",
            65,
            "pw: group name `redis' already exists\n",
        ),
        (
            "groupadd other -g 535",
            65,
            "pw: gid `535' has already been allocated\n",
        ),
        (
            "useradd redis -u 999",
            65,
            "pw: login name `redis' already exists\n",
        ),
        (
            "useradd other -u 535",
            65,
            "pw: uid `535' has already been allocated\n",
        ),
        (
            "useradd other -g nosuch",
            67,
            "pw: group `nosuch' is not defined\n",
        ),
        ("usershow nosuch", 67, "pw: no such user `nosuch'\n"),
        ("groupshow nosuch", 65, "pw: unknown group `nosuch'\n"),
        (
            "groupmod www -m nosuch",
            67,
            "pw: user `nosuch' does not exist\n",
        ),
        ("userdel nosuch", 67, "pw: no such user `nosuch'\n"),
        ("useradd other -w yes", 64, ""),
    ] {
        let r = run(root, line);
        assert_eq!(r.code, code, "pw {line}: {}", r.stderr);
        if !msg.is_empty() {
            assert_eq!(r.stderr, msg, "pw {line}");
        }
    }
    // The template's test: `pw groupshow redis >/dev/null 2>&1` is 0 now,
    // and -q silences the complaint.
    let r = run(root, "usershow nosuch -q");
    assert_eq!((r.code, r.stderr.as_str()), (67, ""));
    assert_eq!(std::fs::read(root.join("etc/pwd.db")).unwrap(), before);
}

#[test]
fn ids_are_allocated_as_pw_allocates_them() {
    let t = base();
    let root = t.path();
    // pw.conf's range, the next after the highest in it.
    std::fs::write(
        root.join("etc/pw.conf"),
        "minuid = 2000\nmaxuid 2100\nmingid = 3000\n",
    )
    .unwrap();
    assert_eq!(run(root, "groupadd a").code, 0);
    assert_eq!(run(root, "groupadd b -g 3050").code, 0);
    assert_eq!(run(root, "groupadd c").code, 0);
    let g = std::fs::read_to_string(root.join("etc/group")).unwrap();
    assert!(g.ends_with("a:*:3000:\nb:*:3050:\nc:*:3051:\n"), "{g}");
    // A user without -g gets its own group, gid = uid when that is free.
    assert_eq!(run(root, "useradd u1 -s /bin/sh -d /nonexistent").code, 0);
    assert_eq!(
        run(root, "useradd u2 -u 3051 -d /nonexistent -s /bin/sh").code,
        0
    );
    let r = run(root, "usershow u1");
    assert_eq!(
        r.stdout,
        "u1:*:2000:2000::0:0:User &:/nonexistent:/bin/sh\n"
    );
    // gid 3051 is taken (c): the group u2 gets is the next free one.
    let r = run(root, "groupshow u2");
    assert_eq!(r.stdout, "u2:*:3052:\n");
    assert_eq!(
        run(root, "usershow u2").stdout,
        "u2:*:3051:3052::0:0:User &:/nonexistent:/bin/sh\n"
    );
}

#[test]
fn m_makes_the_home_owned_by_the_new_user_and_the_shell_is_found_in_the_image() {
    let t = base();
    let root = t.path();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::write(root.join("bin/csh"), "").unwrap();
    std::fs::set_permissions(root.join("bin/csh"), std::fs::Permissions::from_mode(0o555)).unwrap();
    let r = run(root, "useradd alice -m -s csh -G wheel,operator");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let home = root.join("home/alice");
    let meta = std::fs::metadata(&home).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o7777),
        (1000, 1000, 0o755)
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".profile")).unwrap(),
        "PATH=/bin\n"
    );
    assert_eq!(
        run(root, "usershow alice").stdout,
        "alice:*:1000:1000::0:0:User &:/home/alice:/bin/csh\n"
    );
    let g = std::fs::read_to_string(root.join("etc/group")).unwrap();
    assert!(g.contains("wheel:*:0:root,alice\n") && g.contains("operator:*:5:root,alice\n"));
    // A shell the image lacks.
    assert_eq!(run(root, "useradd bob -s zsh").code, 78);
}

#[test]
fn pwd_mkdb_as_the_runtime_package_runs_it_gives_what_pw_wrote() {
    let t = base();
    let root = t.path();
    users_template(root);
    let etc = root.join("etc");
    let files = ["pwd.db", "spwd.db", "passwd", "master.passwd"];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(etc.join(f)).unwrap())
        .collect();
    for f in ["pwd.db", "spwd.db", "passwd"] {
        std::fs::remove_file(etc.join(f)).unwrap();
    }
    let r = run_with(pwd_mkdb, root, "-i -p -d /etc /etc/master.passwd").unwrap();
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let after: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(etc.join(f)).unwrap())
        .collect();
    assert_eq!(before, after);
    // A broken line: pwd_mkdb's complaint, status 1, nothing written.
    std::fs::write(
        etc.join("master.passwd"),
        "root::1:0::0:0:x:/root:/bin/sh\n",
    )
    .unwrap();
    let r = run_with(pwd_mkdb, root, "-p /etc/master.passwd").unwrap();
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("pwd_mkdb: root uid should be 0\npwd_mkdb: at line #1\n"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(etc.join("pwd.db")).unwrap(), before[0]);
}

#[test]
fn two_roots_get_the_same_bytes() {
    let (a, b) = (base(), base());
    users_template(a.path());
    users_template(b.path());
    for f in ["master.passwd", "group", "passwd", "pwd.db", "spwd.db"] {
        assert_eq!(
            std::fs::read(a.path().join("etc").join(f)).unwrap(),
            std::fs::read(b.path().join("etc").join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn a_root_whose_etc_or_master_passwd_leads_out_is_refused_and_the_host_untouched() {
    let host = tempfile::tempdir().unwrap();
    let outside = host.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("master.passwd"), MASTER).unwrap();
    std::fs::write(outside.join("group"), GROUP).unwrap();
    std::fs::write(outside.join("canary"), "host").unwrap();
    let snapshot = |d: &Path| {
        let mut v: Vec<(String, Vec<u8>, u32)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let m = e.metadata().unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                    m.mode(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let was = snapshot(&outside);

    // etc -> /abs/outside
    let t = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&outside, t.path().join("etc")).unwrap();
    for line in ["useradd evil -u 4000", "groupadd evil", "usershow root"] {
        let e = run_with(pw, t.path(), line)
            .err()
            .unwrap_or_else(|| panic!("pw {line} refused"));
        assert!(matches!(e, CommandError::Hostile { .. }), "{e}");
    }
    // etc/master.passwd -> ../../outside/master.passwd (climbs out)
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("etc")).unwrap();
    std::fs::write(t.path().join("etc/group"), GROUP).unwrap();
    let rel = Path::new("../..").join(outside.strip_prefix("/").unwrap());
    let climb = Path::new("../")
        .join("../".repeat(t.path().components().count()))
        .join(&rel);
    std::os::unix::fs::symlink(&climb, t.path().join("etc/master.passwd")).unwrap();
    let e = run_with(pw, t.path(), "useradd evil -u 4000")
        .err()
        .expect("refused");
    assert!(matches!(e, CommandError::Hostile { .. }), "{e}");
    let e = run_with(pwd_mkdb, t.path(), "-p /etc/master.passwd")
        .err()
        .expect("refused");
    assert!(matches!(e, CommandError::Hostile { .. }), "{e}");

    assert_eq!(snapshot(&outside), was, "the host's files untouched");
}
