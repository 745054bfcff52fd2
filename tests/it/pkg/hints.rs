//! The dynamic linker's hints (`jbuild::pkg::hints`): the file parsed by
//! a reader written here from `include/elf-hints.h`'s header (not
//! jbuild's), for images whose rc.conf, packages' `libdata/ldconfig`
//! files and lib32 say which directories rtld searches; big-endian for a
//! powerpc64 image; the same bytes twice; a root whose `/var/run` or
//! `libdata` leads out refused; and the commands package scripts run.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use jbuild::pkg::hints::{self, HintsError};
use jbuild::pkg::script::{CommandError, Io};

/// `struct elfhints_hdr` read back: six words, 26 spare words, then the
/// string table (here only the directory list), in `big`'s order.
#[derive(Debug)]
struct Hdr {
    magic: u32,
    version: u32,
    strtab: u32,
    strsize: u32,
    dirlist: u32,
    dirlistlen: u32,
    spare_zero: bool,
    dirs: String,
}

fn parse(bytes: &[u8], big: bool) -> Hdr {
    let word = |i: usize| {
        let w: [u8; 4] = bytes[i * 4..i * 4 + 4].try_into().unwrap();
        if big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let (strtab, dirlist, dirlistlen) = (word(2), word(4), word(5));
    let start = (strtab + dirlist) as usize;
    let dirs = &bytes[start..start + dirlistlen as usize];
    assert_eq!(
        bytes[start + dirlistlen as usize],
        0,
        "the list ends with a NUL"
    );
    assert_eq!(
        bytes.len(),
        start + dirlistlen as usize + 1,
        "nothing after it"
    );
    Hdr {
        magic: word(0),
        version: word(1),
        strtab,
        strsize: word(3),
        dirlist,
        dirlistlen,
        spare_zero: (6..32).all(|i| word(i) == 0),
        dirs: String::from_utf8(dirs.to_vec()).unwrap(),
    }
}

fn check(bytes: &[u8], big: bool, dirs: &[&str]) {
    let h = parse(bytes, big);
    let want = dirs.join(":");
    assert_eq!(h.magic, 0x746e_6845, "{h:?}");
    assert_eq!(h.version, 1);
    assert_eq!(h.strtab, 128, "the string table right after the header");
    assert_eq!(h.dirlist, 0);
    assert_eq!(h.dirlistlen as usize, want.len());
    assert_eq!(h.strsize as usize, want.len() + 1);
    assert!(h.spare_zero);
    assert_eq!(h.dirs, want);
}

fn put(root: &Path, path: &str, content: &[u8]) {
    let p = root.join(path.trim_start_matches('/'));
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

fn dir(root: &Path, path: &str, mode: u32) {
    let p = root.join(path.trim_start_matches('/'));
    fs::create_dir_all(&p).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
}

/// An ELF header: 64-bit, `big`-endian or not, for `machine`.
fn elf(big: bool, machine: u16) -> Vec<u8> {
    let mut h = b"\x7fELF".to_vec();
    h.extend([2, if big { 2 } else { 1 }, 1, 9]);
    h.resize(16, 0);
    let two = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    h.extend(two(3)); // ET_DYN
    h.extend(two(machine));
    h.resize(64, 0);
    h
}

/// rc.conf's defaults for ldconfig, as FreeBSD's `etc/defaults/rc.conf`
/// has them.
const DEFAULTS: &str = r#"
: ${_localbase:="/usr/local"}
ldconfig_insecure="NO"	# Set to YES to disable ldconfig security checks
ldconfig_paths="/usr/lib/compat ${_localbase}/lib ${_localbase}/lib/compat/pkg"
			# shared library search paths
ldconfig32_paths="/usr/lib32 /usr/lib32/compat"
ldconfig_local_dirs="${_localbase}/libdata/ldconfig"
ldconfig_local32_dirs="${_localbase}/libdata/ldconfig32"
"#;

/// A FreeBSD-like root for `machine`, with `/sbin/ldconfig`.
fn image(root: &Path, big: bool, machine: u16) {
    put(root, "/libexec/ld-elf.so.1", &elf(big, machine));
    put(root, "/sbin/ldconfig", b"\x7fELF");
    fs::set_permissions(
        root.join("sbin/ldconfig"),
        fs::Permissions::from_mode(0o555),
    )
    .unwrap();
    put(root, "/etc/defaults/rc.conf", DEFAULTS.as_bytes());
    for d in ["/lib", "/usr/lib", "/var/run", "/usr/local/lib"] {
        dir(root, d, 0o755);
    }
}

/// An amd64 image with rc.conf additions, two packages' libdata files,
/// a missing directory, a group-writable one, and lib32.
fn amd64(root: &Path) {
    image(root, false, 62);
    put(
        root,
        "/etc/rc.conf",
        b"hostname=\"demo\"\nldconfig_paths=\"$ldconfig_paths /opt/lib /missing/lib /opt/shared\"\n",
    );
    dir(root, "/opt/lib", 0o755);
    dir(root, "/opt/shared", 0o775);
    // Two packages' files: read whole, lines sorted, each once.
    put(
        root,
        "/usr/local/libdata/ldconfig/a-perl5",
        b"/usr/local/lib/perl5/5.40/mach/CORE\n",
    );
    put(
        root,
        "/usr/local/libdata/ldconfig/mysql",
        b"/usr/local/lib/mysql\n/usr/local/lib\n",
    );
    dir(root, "/usr/local/lib/perl5/5.40/mach/CORE", 0o755);
    dir(root, "/usr/local/lib/mysql", 0o755);
    dir(root, "/usr/lib32", 0o755);
    put(root, "/libexec/ld-elf32.so.1", b"\x7fELF");
    put(
        root,
        "/usr/local/libdata/ldconfig32/wine",
        b"/usr/local/lib32\n",
    );
    dir(root, "/usr/local/lib32", 0o755);
}

const AMD64_DIRS: [&str; 6] = [
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
    "/opt/lib",
    "/usr/local/lib/mysql",
    "/usr/local/lib/perl5/5.40/mach/CORE",
];

#[test]
fn the_hints_list_what_the_image_configures_in_rc_d_order() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    amd64(root);
    let done = hints::rebuild(root).unwrap();

    let bytes = fs::read(root.join("var/run/ld-elf.so.hints")).unwrap();
    check(&bytes, false, &AMD64_DIRS);
    assert_eq!(&bytes[..4], b"Ehnt", "little-endian on amd64");
    let mode = fs::metadata(root.join("var/run/ld-elf.so.hints"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o444, "as ldconfig's fchmod");
    let b32 = fs::read(root.join("var/run/ld-elf32.so.hints")).unwrap();
    check(&b32, false, &["/usr/lib32", "/usr/local/lib32"]);

    assert_eq!(done.written.len(), 2);
    assert_eq!(done.written[0].dirs, AMD64_DIRS);
    assert!(
        done.warnings
            .iter()
            .any(|w| w == "ldconfig: /opt/shared: ignoring group-writable directory"),
        "{:?}",
        done.warnings
    );
}

#[test]
fn a_powerpc64_image_gets_a_big_endian_file_and_no_lib32_without_one() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    image(root, true, 21);
    hints::rebuild(root).unwrap();
    let bytes = fs::read(root.join("var/run/ld-elf.so.hints")).unwrap();
    assert_eq!(&bytes[..4], b"tnhE");
    check(&bytes, true, &["/lib", "/usr/lib", "/usr/local/lib"]);
    assert!(!root.join("var/run/ld-elf32.so.hints").exists());
}

#[test]
fn the_same_image_gives_the_same_bytes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    amd64(a.path());
    amd64(b.path());
    hints::rebuild(a.path()).unwrap();
    let first = fs::read(a.path().join("var/run/ld-elf.so.hints")).unwrap();
    hints::rebuild(a.path()).unwrap();
    hints::rebuild(b.path()).unwrap();
    for root in [a.path(), b.path()] {
        assert_eq!(
            fs::read(root.join("var/run/ld-elf.so.hints")).unwrap(),
            first
        );
    }
}

#[test]
fn a_var_run_or_libdata_leading_out_of_the_root_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    image(root, false, 62);
    fs::remove_dir(root.join("var/run")).unwrap();
    symlink(outside.path(), root.join("var/run")).unwrap();
    let e = hints::rebuild(root).unwrap_err();
    assert!(matches!(e, HintsError::Hostile { .. }), "{e:?}");
    assert!(e.to_string().contains("/var/run"), "{e}");

    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    image(root, false, 62);
    dir(root, "/usr/local", 0o755);
    symlink(outside.path(), root.join("usr/local/libdata")).unwrap();
    put(outside.path(), "/ldconfig/evil", b"/usr/local/lib\n");
    let e = hints::rebuild(root).unwrap_err();
    assert!(matches!(e, HintsError::Hostile { .. }), "{e:?}");
    assert_eq!(
        fs::read_dir(outside.path()).unwrap().count(),
        1,
        "nothing written outside"
    );
    assert!(!root.join("var/run/ld-elf.so.hints").exists());
}

fn run(
    f: fn(&Path, &[String], &mut Io<'_>) -> Result<i32, CommandError>,
    root: &Path,
    args: &[&str],
) -> (Result<i32, CommandError>, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let mut io = Io {
        stdin: b"",
        stdout: &mut out,
        stderr: &mut err,
    };
    let r = f(root, &args, &mut io);
    (
        r,
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
    )
}

#[test]
fn the_commands_package_scripts_run() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    amd64(root);
    put(root, "/usr/local/lib/libfoo.so.3", b"");
    put(root, "/usr/local/lib/libfoo.so", b"");

    // What @ldconfig's post-install runs.
    let (r, out, _) = run(hints::service, root, &["ldconfig", "restart"]);
    assert_eq!(r.unwrap(), 0);
    assert!(
        out.starts_with("ELF ldconfig path: /lib /usr/lib /usr/local/lib /opt/lib"),
        "{out}"
    );
    check(
        &fs::read(root.join("var/run/ld-elf.so.hints")).unwrap(),
        false,
        &AMD64_DIRS,
    );

    // ldconfig -m adds to the file; -r prints it as FreeBSD does.
    dir(root, "/usr/local/lib/extra", 0o755);
    let (r, _, _) = run(hints::ldconfig, root, &["-m", "/usr/local/lib/extra"]);
    assert_eq!(r.unwrap(), 0);
    let (r, out, _) = run(hints::ldconfig, root, &["-r"]);
    assert_eq!(r.unwrap(), 0);
    let mut want = AMD64_DIRS.to_vec();
    want.push("/usr/local/lib/extra");
    assert_eq!(
        out,
        format!(
            "/var/run/ld-elf.so.hints:\n\tsearch directories: {}\n\t0:-lfoo.3 => /usr/local/lib/libfoo.so.3\n",
            want.join(":")
        )
    );

    // -f names a file in the image; -B writes big-endian.
    dir(root, "/tmp", 0o1777);
    let (r, _, _) = run(hints::ldconfig, root, &["-B", "-f", "/tmp/h", "/usr/lib"]);
    assert_eq!(r.unwrap(), 0);
    check(&fs::read(root.join("tmp/h")).unwrap(), true, &["/usr/lib"]);

    // A user's mistake is ldconfig's exit status, not a fault.
    let (r, _, err) = run(hints::ldconfig, root, &["-x"]);
    assert_eq!(r.unwrap(), 1);
    assert!(err.contains("usage: ldconfig"), "{err}");

    // The rc.d script directly, and another service refused by name.
    let (r, _, _) = run(hints::rc_ldconfig, root, &["start"]);
    assert_eq!(r.unwrap(), 0);
    let (r, _, _) = run(hints::service, root, &["nginx", "start"]);
    match r.unwrap_err() {
        CommandError::Unknown { command } => assert_eq!(command, "service nginx start"),
        other => panic!("{other:?}"),
    }
}
