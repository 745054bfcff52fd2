//! The scripts the ports tree generates: USERS/GROUPS (both variants of
//! Mk/Scripts/do-users-groups.sh's output), `@ldconfig`, and a
//! hand-written pkg-install.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::super::{parse, run, CommandError, Env, Host, Io, Limits, ScriptError};

/// `pw` as far as the template needs it: `groupshow`/`usershow` answered
/// from the image's files, `groupadd`/`useradd`/`groupmod` recorded and
/// written to them (so that `install -o` finds the new user).
struct Pw {
    root: PathBuf,
    calls: Vec<Vec<String>>,
    /// `useradd` fails with this status (the newer template exits).
    useradd_fails: Option<i32>,
}

impl Pw {
    fn new(root: &Path) -> Pw {
        Pw {
            root: root.to_path_buf(),
            calls: Vec::new(),
            useradd_fails: None,
        }
    }

    fn line(&self, file: &str, name: &str) -> Option<String> {
        let text = fs::read_to_string(self.root.join("etc").join(file)).unwrap_or_default();
        text.lines()
            .find(|l| l.split(':').next() == Some(name))
            .map(str::to_string)
    }

    fn append(&self, file: &str, line: &str) {
        let p = self.root.join("etc").join(file);
        let mut text = fs::read_to_string(&p).unwrap_or_default();
        text.push_str(line);
        text.push('\n');
        fs::write(p, text).unwrap();
    }
}

impl Host for Pw {
    fn command(
        &mut self,
        name: &str,
        args: &[String],
        io: &mut Io<'_>,
    ) -> Result<i32, CommandError> {
        let mut argv = vec![name.to_string()];
        argv.extend(args.iter().cloned());
        self.calls.push(argv);
        if name != "/usr/sbin/pw" {
            return Err(CommandError::Unknown {
                command: name.to_string(),
            });
        }
        // `pw -R DIR …`: the test image is the same either way.
        let args = if args.first().map(String::as_str) == Some("-R") {
            &args[2..]
        } else {
            args
        };
        let w = |i: usize| args.get(i).cloned().unwrap_or_default();
        match args.first().map(String::as_str) {
            Some("groupshow") => match self.line("group", &w(1)) {
                Some(l) => {
                    io.stdout.extend_from_slice(format!("{l}\n").as_bytes());
                    Ok(0)
                }
                None => {
                    io.stderr
                        .extend_from_slice(format!("pw: unknown group `{}'\n", w(1)).as_bytes());
                    Ok(65)
                }
            },
            Some("usershow") => match self.line("master.passwd", &w(1)) {
                Some(l) => {
                    io.stdout.extend_from_slice(format!("{l}\n").as_bytes());
                    Ok(0)
                }
                None => {
                    io.stderr
                        .extend_from_slice(format!("pw: no such user `{}'\n", w(1)).as_bytes());
                    Ok(67)
                }
            },
            Some("groupadd") => {
                self.append("group", &format!("{}:*:{}:", w(1), w(3)));
                Ok(0)
            }
            Some("useradd") => {
                if let Some(st) = self.useradd_fails {
                    return Ok(st);
                }
                // pw useradd NAME -u UID -g GID [-L class] -c GECOS -d HOME -s SHELL
                let get = |flag: &str| {
                    args.iter()
                        .position(|a| a == flag)
                        .and_then(|i| args.get(i + 1))
                        .cloned()
                        .unwrap_or_default()
                };
                let line = format!(
                    "{}:*:{}:{}::0:0:{}:{}:{}",
                    w(1),
                    get("-u"),
                    get("-g"),
                    get("-c"),
                    get("-d"),
                    get("-s")
                );
                self.append("master.passwd", &line);
                Ok(0)
            }
            Some("groupmod") => Ok(0),
            _ => Ok(64),
        }
    }

    fn knows(&self, name: &str) -> bool {
        name == "/usr/sbin/pw"
    }
}

/// Mk/Scripts/do-users-groups.sh's output for USERS=redis GROUPS=redis
/// (redis:*:535:535::0:0:Redis Daemon:/var/db/redis:/usr/sbin/nologin),
/// with redis also listed in the `www` group, as the generator of 2016-2024 wrote it.
const OLDER: &str = r#"if [ -n "${PKG_ROOTDIR}" ] && [ "${PKG_ROOTDIR}" != "/" ]; then
  PW="/usr/sbin/pw -R ${PKG_ROOTDIR}"
else
  PW=/usr/sbin/pw
fi
echo "===> Creating groups."
if ! ${PW} groupshow redis >/dev/null 2>&1; then
  echo "Creating group 'redis' with gid '535'."
  ${PW} groupadd redis -g 535
else
  echo "Using existing group 'redis'."
fi
echo "===> Creating users"
if ! ${PW} usershow redis >/dev/null 2>&1; then
  echo "Creating user 'redis' with uid '535'."
  ${PW} useradd redis -u 535 -g 535  -c "Redis Daemon" -d /var/db/redis -s /usr/sbin/nologin
else
  echo "Using existing user 'redis'."
fi
/usr/bin/install -c -d -g redis -o redis /var/db/redis
if ! ${PW} groupshow www | grep -qw redis; then
  echo "Adding user 'redis' to group 'www'."
  ${PW} groupmod www -m redis
fi
"#;

/// The newer output: `|| exit $?` after groupadd/useradd, no trailing
/// dots, and the home directory through `-N` when PKG_ROOTDIR is not `/`.
const NEWER: &str = r#"if [ -n "${PKG_ROOTDIR}" ] && [ "${PKG_ROOTDIR}" != "/" ]; then
  PW="/usr/sbin/pw -R ${PKG_ROOTDIR}"
else
  PW=/usr/sbin/pw
fi
echo "===> Creating groups"
if ! ${PW} groupshow redis >/dev/null 2>&1; then
  echo "Creating group 'redis' with gid '535'"
  ${PW} groupadd redis -g 535 || exit $?
else
  echo "Using existing group 'redis'"
fi
echo "===> Creating users"
if ! ${PW} usershow redis >/dev/null 2>&1; then
  echo "Creating user 'redis' with uid '535'"
  ${PW} useradd redis -u 535 -g 535  -c "Redis Daemon" -d /var/db/redis -s /usr/sbin/nologin || exit $?
else
  echo "Using existing user 'redis'"
fi
echo "===> Creating homedir(s)"
if [ -n "${PKG_ROOTDIR}" ] && [ "${PKG_ROOTDIR}" != "/" ]; then
  HOMEDIR="${PKG_ROOTDIR}/var/db/redis"; MDBDIR="-N ${PKG_ROOTDIR}/etc/"
else
  HOMEDIR="/var/db/redis"; MDBDIR=""
fi
/usr/bin/install ${MDBDIR} -d -g redis -o redis ${HOMEDIR}
if ! ${PW} groupshow www | grep -qw redis; then
  echo "Adding user 'redis' to group 'www'"
  ${PW} groupmod www -m redis
fi
"#;

fn image(with_redis: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    fs::create_dir_all(&etc).unwrap();
    fs::create_dir_all(dir.path().join("var/db")).unwrap();
    let mut passwd = "root:*:0:0::0:0:Charlie &:/root:/bin/sh\nwww:*:80:80::0:0:World Wide Web Owner:/nonexistent:/usr/sbin/nologin\n".to_string();
    let mut group = "wheel:*:0:root\nwww:*:80:\n".to_string();
    if with_redis {
        passwd.push_str("redis:*:535:535::0:0:Redis Daemon:/var/db/redis:/usr/sbin/nologin\n");
        group = "wheel:*:0:root\nwww:*:80:redis\nredis:*:535:\n".to_string();
    }
    fs::write(etc.join("master.passwd"), passwd).unwrap();
    fs::write(etc.join("group"), group).unwrap();
    dir
}

fn pkg_env(rootdir: &str) -> Env {
    Env {
        vars: vec![
            ("PKG_NAME".into(), "redis".into()),
            ("PKG_PREFIX".into(), "/usr/local".into()),
            ("PKG_ROOTDIR".into(), rootdir.into()),
        ],
        args: vec!["redis-7.2.5".into()],
    }
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

fn users_template(text: &str, exists: bool) -> (Pw, super::super::Ran, tempfile::TempDir) {
    let dir = image(exists);
    let mut pw = Pw::new(dir.path());
    let ran = run(
        dir.path(),
        &parse(text).unwrap(),
        &pkg_env("/"),
        &mut pw,
        &Limits::default(),
    )
    .unwrap();
    (pw, ran, dir)
}

fn home_is_redis(root: &Path) {
    let m = fs::metadata(root.join("var/db/redis")).unwrap();
    assert!(m.is_dir());
    assert_eq!(m.permissions().mode() & 0o7777, 0o755);
    if nix::unistd::geteuid().is_root() {
        assert_eq!(
            (m.uid(), m.gid()),
            (535, 535),
            "the image's uid/gid of redis"
        );
    }
}

#[test]
fn users_groups_older_template_creates_the_user() {
    for text in [OLDER, NEWER] {
        let (pw, ran, dir) = users_template(text, false);
        assert_eq!(ran.status, 0, "{}", String::from_utf8_lossy(&ran.stderr));
        assert_eq!(
            pw.calls,
            vec![
                words(&["/usr/sbin/pw", "groupshow", "redis"]),
                words(&["/usr/sbin/pw", "groupadd", "redis", "-g", "535"]),
                words(&["/usr/sbin/pw", "usershow", "redis"]),
                words(&[
                    "/usr/sbin/pw",
                    "useradd",
                    "redis",
                    "-u",
                    "535",
                    "-g",
                    "535",
                    "-c",
                    "Redis Daemon",
                    "-d",
                    "/var/db/redis",
                    "-s",
                    "/usr/sbin/nologin"
                ]),
                words(&["/usr/sbin/pw", "groupshow", "www"]),
                words(&["/usr/sbin/pw", "groupmod", "www", "-m", "redis"]),
            ]
        );
        let out = String::from_utf8(ran.stdout).unwrap();
        assert!(
            out.contains("Creating group 'redis' with gid '535'"),
            "{out}"
        );
        assert!(
            out.contains("Creating user 'redis' with uid '535'"),
            "{out}"
        );
        assert!(out.contains("Adding user 'redis' to group 'www'"), "{out}");
        // `>/dev/null 2>&1` kept pw's "unknown group" off the output.
        assert!(
            ran.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&ran.stderr)
        );
        home_is_redis(dir.path());
    }
}

#[test]
fn users_groups_template_keeps_an_existing_user() {
    for text in [OLDER, NEWER] {
        let (pw, ran, dir) = users_template(text, true);
        assert_eq!(ran.status, 0);
        assert_eq!(
            pw.calls,
            vec![
                words(&["/usr/sbin/pw", "groupshow", "redis"]),
                words(&["/usr/sbin/pw", "usershow", "redis"]),
                words(&["/usr/sbin/pw", "groupshow", "www"]),
            ]
        );
        let out = String::from_utf8(ran.stdout).unwrap();
        assert!(out.contains("Using existing group 'redis'"), "{out}");
        assert!(out.contains("Using existing user 'redis'"), "{out}");
        assert!(!out.contains("Adding user"), "{out}");
        home_is_redis(dir.path());
    }
}

#[test]
fn newer_template_exits_with_pws_status() {
    let dir = image(false);
    let mut pw = Pw::new(dir.path());
    pw.useradd_fails = Some(67);
    let ran = run(
        dir.path(),
        &parse(NEWER).unwrap(),
        &pkg_env("/"),
        &mut pw,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(ran.status, 67);
    assert_eq!(pw.calls.last().unwrap()[1], "useradd");
    assert!(!dir.path().join("var/db/redis").exists());
    // The older template carries on past the failure (its user missing):
    // `install -o redis` then fails with install's own error.
    let dir = image(false);
    let mut pw = Pw::new(dir.path());
    pw.useradd_fails = Some(67);
    let ran = run(
        dir.path(),
        &parse(OLDER).unwrap(),
        &pkg_env("/"),
        &mut pw,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(
        ran.status, 0,
        "the older template's status is its last command's"
    );
    assert!(String::from_utf8_lossy(&ran.stderr).contains("install: unknown user redis"));
}

#[test]
fn newer_template_with_a_rootdir_uses_pw_r_and_install_n() {
    // Run as pkg -r /img would: PKG_ROOTDIR names a directory, which the
    // interpreter resolves inside the image.
    let dir = image(false);
    fs::create_dir_all(dir.path().join("img/etc")).unwrap();
    fs::create_dir_all(dir.path().join("img/var/db")).unwrap();
    fs::write(
        dir.path().join("img/etc/master.passwd"),
        "redis:*:536:537::0:0:R:/var/db/redis:/bin/sh\n",
    )
    .unwrap();
    fs::write(
        dir.path().join("img/etc/group"),
        "redis:*:537:\nwww:*:80:redis\n",
    )
    .unwrap();
    let mut pw = Pw::new(dir.path());
    let ran = run(
        dir.path(),
        &parse(NEWER).unwrap(),
        &pkg_env("/img"),
        &mut pw,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(ran.status, 0, "{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(
        pw.calls[0],
        words(&["/usr/sbin/pw", "-R", "/img", "groupshow", "redis"])
    );
    let m = fs::metadata(dir.path().join("img/var/db/redis")).unwrap();
    if nix::unistd::geteuid().is_root() {
        assert_eq!(
            (m.uid(), m.gid()),
            (536, 537),
            "-N /img/etc/ decides the numbers"
        );
    }
}

const LDCONFIG: &str = r#"if ! /usr/sbin/service ldconfig restart >/dev/null; then if [ -z "${INSTALL_AS_USER}" ]; then exit 1; fi; fi"#;

struct Service(i32, Vec<Vec<String>>);

impl Host for Service {
    fn command(
        &mut self,
        name: &str,
        args: &[String],
        io: &mut Io<'_>,
    ) -> Result<i32, CommandError> {
        let mut argv = vec![name.to_string()];
        argv.extend(args.iter().cloned());
        self.1.push(argv);
        io.stdout
            .extend_from_slice(b"ELF ldconfig path: /lib /usr/lib\n");
        Ok(self.0)
    }

    fn knows(&self, _: &str) -> bool {
        true
    }
}

#[test]
fn ldconfig_post_install() {
    let dir = tempfile::tempdir().unwrap();
    let script = parse(LDCONFIG).unwrap();
    let mut ok = Service(0, Vec::new());
    let ran = run(
        dir.path(),
        &script,
        &Env::default(),
        &mut ok,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(ran.status, 0);
    assert!(ran.stdout.is_empty(), "service's output went to /dev/null");
    assert_eq!(
        ok.1,
        vec![words(&["/usr/sbin/service", "ldconfig", "restart"])]
    );
    let mut failing = Service(1, Vec::new());
    let ran = run(
        dir.path(),
        &script,
        &Env::default(),
        &mut failing,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(ran.status, 1);
    let as_user = Env {
        vars: vec![("INSTALL_AS_USER".into(), "yes".into())],
        args: vec![],
    };
    let ran = run(
        dir.path(),
        &script,
        &as_user,
        &mut Service(1, Vec::new()),
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(ran.status, 0);
}

#[test]
fn ldconfig_with_a_host_that_lacks_service_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = parse(&format!("echo first\n{LDCONFIG}\n")).unwrap();
    let mut host = super::Recorder::default();
    let err = run(
        dir.path(),
        &script,
        &Env::default(),
        &mut host,
        &Limits::default(),
    )
    .unwrap_err();
    match &err {
        ScriptError::Command {
            command,
            line,
            source: CommandError::Unknown { .. },
        } => assert_eq!((command.as_str(), *line), ("/usr/sbin/service", 2)),
        other => panic!("{other:?}"),
    }
    // The cause is the chain's next line, not repeated in the message.
    assert_eq!(err.to_string(), "line 2: /usr/sbin/service");
    assert_eq!(
        std::error::Error::source(&err).map(ToString::to_string),
        Some("`/usr/sbin/service` is not a command jbuild carries out".to_string())
    );
}

const PKG_INSTALL: &str = r#"#!/bin/sh
# pkg-install for a port with its own configuration
PREFIX=${PKG_PREFIX:-/usr/local}
CONF=${PREFIX}/etc/foo/foo.conf

case $2 in
PRE-INSTALL)
	echo "Preparing ${PKG_NAME}"
	;;
POST-INSTALL)
	if [ ! -d ${PREFIX}/etc/foo ]; then
		mkdir -p -m 755 ${PREFIX}/etc/foo
	fi
	if [ ! -f ${CONF} ]; then
		cat > ${CONF} <<EOF
# ${PKG_NAME}: written by pkg-install
user=foo
home=$(echo ~foo 2>/dev/null || echo /var/db/foo)
EOF
		chmod 640 ${CONF}
		chown foo:wheel ${CONF}
	fi
	echo "${CONF} written" >&2
	;;
esac
exit 0
"#;

#[test]
fn hand_written_pkg_install() {
    let dir = image(false);
    fs::write(
        dir.path().join("etc/master.passwd"),
        "root:*:0:0::0:0:Charlie &:/root:/bin/sh\nfoo:*:4321:4321::0:0:Foo:/var/db/foo:/usr/sbin/nologin\n",
    )
    .unwrap();
    let script = parse(PKG_INSTALL).unwrap();
    let mut env = pkg_env("/");
    env.vars[0].1 = "foo".into();
    let mut host = super::Recorder::default();
    env.args = vec!["foo-1.0".into(), "PRE-INSTALL".into()];
    let ran = run(dir.path(), &script, &env, &mut host, &Limits::default()).unwrap();
    assert_eq!((ran.status, ran.stdout), (0, b"Preparing foo\n".to_vec()));
    assert!(!dir.path().join("usr/local/etc/foo").exists());
    env.args = vec!["foo-1.0".into(), "POST-INSTALL".into()];
    let ran = run(dir.path(), &script, &env, &mut host, &Limits::default()).unwrap();
    assert_eq!(ran.status, 0, "{}", String::from_utf8_lossy(&ran.stderr));
    assert_eq!(
        String::from_utf8(ran.stderr).unwrap(),
        "/usr/local/etc/foo/foo.conf written\n"
    );
    let conf = dir.path().join("usr/local/etc/foo/foo.conf");
    assert_eq!(
        fs::read_to_string(&conf).unwrap(),
        "# foo: written by pkg-install\nuser=foo\nhome=/var/db/foo\n"
    );
    let m = fs::metadata(&conf).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o640);
    if nix::unistd::geteuid().is_root() {
        assert_eq!((m.uid(), m.gid()), (4321, 0));
    }
    assert!(
        host.calls.is_empty(),
        "everything ran inside: {:?}",
        host.calls
    );
}

/// FreeBSD-runtime's post-install (pkgbase, release/packages/runtime.ucl
/// with an empty %CAP_MKDB_ENDIAN%), tabs and all.
const RUNTIME: &str = "\tcap_mkdb  ${PKG_ROOTDIR}/etc/login.conf\n\tpwd_mkdb -i -p -d  ${PKG_ROOTDIR}/etc ${PKG_ROOTDIR}/etc/master.passwd\n\tservices_mkdb  -q -o ${PKG_ROOTDIR}/var/db/services.db ${PKG_ROOTDIR}/etc/services\n\tchmod 1777 ${PKG_ROOTDIR}/tmp\n";

#[test]
fn pkgbase_runtime_post_install() {
    let dir = image(false);
    fs::create_dir(dir.path().join("tmp")).unwrap();
    let mut host = super::Recorder {
        known: vec!["cap_mkdb".into(), "pwd_mkdb".into(), "services_mkdb".into()],
        ..Default::default()
    };
    let ran = run(
        dir.path(),
        &parse(RUNTIME).unwrap(),
        &pkg_env("/"),
        &mut host,
        &Limits::default(),
    )
    .unwrap();
    assert_eq!(ran.status, 0);
    assert_eq!(
        host.calls,
        vec![
            words(&["cap_mkdb", "//etc/login.conf"]),
            words(&["pwd_mkdb", "-i", "-p", "-d", "//etc", "//etc/master.passwd"]),
            words(&[
                "services_mkdb",
                "-q",
                "-o",
                "//var/db/services.db",
                "//etc/services"
            ]),
        ]
    );
    assert_eq!(
        fs::metadata(dir.path().join("tmp"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777,
        0o1777
    );
}
