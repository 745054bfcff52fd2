use super::*;

fn fmt(mnt: &str) -> Format {
    Format::jbuild(Path::new(mnt))
}

fn raw(mnt: &str) -> Format {
    Format {
        raw_names: true,
        ..fmt(mnt)
    }
}

fn p(s: &str) -> Name {
    Name::Path(PathBuf::from(s))
}

fn rec(change: Change, t: FileType, name: Name) -> Record {
    Record {
        change,
        file_type: Some(t),
        name,
        new_name: None,
        link_delta: None,
        ctime: None,
    }
}

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/zfs-diff")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The output OpenZFS 2.3.2 printed, verbatim (from the project's notes).
#[test]
fn readme_output_escaped() {
    let got = parse(&fixture("readme-2.3.2-escaped.txt"), &fmt("/tank/a")).unwrap();
    use Change::*;
    use FileType::*;
    let mut renamed = rec(Renamed, File, p("rename-me.txt"));
    renamed.new_name = Some(p("renamed.txt"));
    assert_eq!(
        got,
        [
            rec(Modified, File, p("modify.txt")),
            rec(Removed, File, p("remove.txt")),
            renamed,
            rec(Modified, File, p("perm.txt")),
            rec(Modified, File, p("dir/inner.txt")),
            rec(Added, File, p("added.txt")),
            rec(Added, File, p("file with spaces.txt")),
            rec(Added, File, p("ünïcödé-日本.txt")),
            rec(Modified, Dir, Name::Root),
            rec(Added, Dir, p("newdir")),
        ]
    );
}

#[test]
fn every_file_type() {
    for (c, t) in [
        ('F', FileType::File),
        ('/', FileType::Dir),
        ('@', FileType::Symlink),
        ('=', FileType::Socket),
        ('|', FileType::Fifo),
        ('B', FileType::BlockDevice),
        ('C', FileType::CharDevice),
        ('>', FileType::Door),
        ('P', FileType::EventPort),
        ('?', FileType::Unknown),
    ] {
        let line = format!("+\t{c}\t/m/x");
        let r = parse_line(line.as_bytes(), &fmt("/m")).unwrap();
        assert_eq!(r.file_type, Some(t), "{c}");
    }
}

#[test]
fn link_count_suffixes() {
    let r = parse_line(b"M\tF\t/m/bin/sh\t(+1)", &fmt("/m")).unwrap();
    assert_eq!((r.change, r.link_delta), (Change::Modified, Some(1)));
    assert_eq!(r.name, p("bin/sh"));
    let r = parse_line(b"M\tF\t/m/a\t(-12)", &fmt("/m")).unwrap();
    assert_eq!(r.link_delta, Some(-12));
    for bad in [
        "(+0)",
        "(1)",
        "(+)",
        "+1",
        "(+1",
        "(+99999999999999999999)",
        "(+1x)",
    ] {
        let line = format!("M\tF\t/m/a\t{bad}");
        let e = parse_line(line.as_bytes(), &fmt("/m")).unwrap_err();
        assert!(e.contains("link-count"), "{bad}: {e}");
    }
    // Only an M line carries a suffix.
    let e = parse_line(b"+\tF\t/m/a\t(+1)", &fmt("/m")).unwrap_err();
    assert!(e.contains("unexpected field"), "{e}");
}

#[test]
fn on_delete_queue_is_the_mountpoint_without_a_slash() {
    let r = parse_line(b"-\tF\t/m(on_delete_queue)", &fmt("/m")).unwrap();
    assert_eq!(r.name, Name::OnDeleteQueue);
    // A real file of that name has the slash.
    let r = parse_line(b"+\tF\t/m/(on_delete_queue)", &fmt("/m")).unwrap();
    assert_eq!(r.name, p("(on_delete_queue)"));
    let e = parse_line(b"R\tF\t/m(on_delete_queue)\t/m/x", &fmt("/m")).unwrap_err();
    assert!(e.contains("delete queue"), "{e}");
}

#[test]
fn recreated_file_is_minus_then_plus() {
    let out = b"-\tF\t/m/etc/motd\n+\tF\t/m/etc/motd\n";
    let got = parse(out, &fmt("/m")).unwrap();
    assert_eq!(got[0].change, Change::Removed);
    assert_eq!(got[1].change, Change::Added);
    assert_eq!(got[0].name, got[1].name);
}

#[test]
fn escapes_decode_to_bytes() {
    assert_eq!(unescape(b"a\\0040b").unwrap(), b"a b");
    assert_eq!(unescape(b"\\0134").unwrap(), b"\\");
    assert_eq!(unescape(b"\\0011\\0012\\0377").unwrap(), b"\t\n\xff");
    // Not UTF-8 at all: still a path.
    let r = parse_line(b"+\tF\t/m/\\0377\\0376", &fmt("/m")).unwrap();
    assert_eq!(
        r.name,
        Name::Path(PathBuf::from(OsStr::from_bytes(b"\xff\xfe")))
    );
    // The mountpoint is escaped too.
    let r = parse_line(b"+\tF\t/my\\0040pool/ds/x", &fmt("/my pool/ds")).unwrap();
    assert_eq!(r.name, p("x"));
}

#[test]
fn bad_escapes_are_errors() {
    for bad in [
        &b"\\"[..],
        b"\\0",
        b"\\004",
        b"\\0400",
        b"\\009a",
        b"a\\x041",
    ] {
        let e = unescape(bad).unwrap_err();
        assert!(e.contains("not an escape"), "{e}");
    }
}

#[test]
fn unescaped_h_output() {
    let out = "M\t/\t/tank/a/\n+\tF\t/tank/a/file with spaces.txt\n+\tF\t/tank/a/ünï\\x.txt\nR\tF\t/tank/a/a b\t/tank/a/c d\n";
    let got = parse(out.as_bytes(), &raw("/tank/a")).unwrap();
    assert_eq!(got[0].name, Name::Root);
    assert_eq!(got[1].name, p("file with spaces.txt"));
    assert_eq!(got[2].name, p("ünï\\x.txt"));
    assert_eq!(got[3].new_name, Some(p("c d")));
    // A tab in a name makes an extra field: refused, with the reason.
    let e = parse(b"+\tF\t/tank/a/x\ty\n", &raw("/tank/a")).unwrap_err();
    assert!(e.reason.contains("-h"), "{e}");
}

#[test]
fn timestamps_and_no_type_column() {
    let f = Format {
        timestamps: true,
        classify: false,
        ..fmt("/m")
    };
    let r = parse_line(b"1700000000.000000042\tM\t/m/a", &f).unwrap();
    assert_eq!(r.ctime, Some((1_700_000_000, 42)));
    assert_eq!(r.file_type, None);
    let r = parse_line(b"       123.100000000\t-\t/m/a", &f).unwrap();
    assert_eq!(r.ctime, Some((123, 100_000_000)));
    assert!(parse_line(b"12.5\tM\t/m/a", &f).is_err());
}

#[test]
fn root_mounted_dataset() {
    let r = parse_line(b"M\tF\t/etc/rc.conf", &fmt("/")).unwrap();
    assert_eq!(r.name, p("etc/rc.conf"));
    let r = parse_line(b"M\t/\t/", &fmt("/")).unwrap();
    assert_eq!(r.name, Name::Root);
}

#[test]
fn empty_output_is_no_changes() {
    assert!(parse(b"", &fmt("/m")).unwrap().is_empty());
    assert!(parse(b"\n", &fmt("/m")).is_err());
}

#[test]
fn hostile_and_garbled_lines_are_errors_with_their_line() {
    let m = fmt("/tank/a");
    let cases: &[(&[u8], &str)] = &[
        (b"X\tF\t/tank/a/x", "unknown change"),
        (b"+\tZ\t/tank/a/x", "unknown file type"),
        (b"+\tFF\t/tank/a/x", "not one character"),
        (b"+\tF", "ends before the path"),
        (b"+", "ends before the type"),
        (b"", "unknown change"),
        (b"R\tF\t/tank/a/x", "new path"),
        (b"+\tF\t/etc/passwd", "not under the mountpoint"),
        (b"+\tF\t/tank/ab", "not under the mountpoint"),
        (b"+\tF\t/tank/a/../../etc/passwd", "not a plain path"),
        (b"+\tF\t/tank/a/./x", "not a plain path"),
        (b"+\tF\t/tank/a//x", "not a plain path"),
        (b"+\tF\t/tank/a/x/", "not a plain path"),
        (b"+\tF\t/tank/a/\\0000", "not a plain path"),
        (b"+\tF\t/tank/a/x\\", "not an escape"),
        (b"+\tF\t/tank/a/x\t/tank/a/y", "unexpected field"),
        (b"M\tF\t/tank/a/x\t(+1)\textra", "unexpected field"),
        (b"\xff\xfe\t\x00\t\x01", "unknown change"),
    ];
    for (i, (line, want)) in cases.iter().enumerate() {
        let mut out = b"M\t/\t/tank/a/\n".to_vec();
        out.extend_from_slice(line);
        out.push(b'\n');
        let e = parse(&out, &m).unwrap_err();
        assert_eq!(e.line, 2, "case {i}");
        assert!(e.reason.contains(want), "case {i}: {e}");
        assert!(
            e.to_string().bytes().all(|b| (b' '..0x7f).contains(&b)),
            "message must be printable: {e}"
        );
    }
}

/// Random bytes never panic the parser, in either naming mode.
#[test]
fn arbitrary_bytes_never_panic() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let alphabet = b"+-MR\tF/@=|BC>P?\\01234567()tank/a \n\x00\xff.";
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 40) as usize;
        let line: Vec<u8> = (0..len)
            .map(|i| alphabet[((x >> (i % 50)) as usize + i * 7) % alphabet.len()])
            .collect();
        let _ = parse(&line, &fmt("/tank/a"));
        let _ = parse(&line, &raw("/tank/a"));
    }
}

/// Live output captured in the qemu lane (OpenZFS 2.3.2): the escaped form
/// reads completely, including a hard link's `(+1)`, a rename with escaped
/// names and a real file named `(on_delete_queue)`.
#[test]
fn live_output_escaped() {
    let got = parse(&fixture("2.3.2-live-escaped.txt"), &fmt("/tank/live/c")).unwrap();
    assert_eq!(got.len(), 20);
    let find = |name: &str| {
        got.iter()
            .find(|r| r.name == p(name))
            .unwrap_or_else(|| panic!("{name} not in {got:#?}"))
    };
    assert_eq!(find("bin/sh").link_delta, Some(1));
    assert_eq!(find("etc/old name").new_name, Some(p("etc/new näme")));
    assert_eq!(find("tab\there").change, Change::Added);
    assert_eq!(find("new\nline").change, Change::Added);
    assert_eq!(find("back\\slash").change, Change::Added);
    assert_eq!(find("\u{7f}del").change, Change::Added);
    assert_eq!(find("(on_delete_queue)").change, Change::Added);
    assert_eq!(find("sym").file_type, Some(FileType::Symlink));
    assert_eq!(find("var/cache/a").change, Change::Removed);
    assert!(got.iter().any(|r| r.name == Name::Root));
}

/// The same change printed with `-h`: the newline in a name splits its
/// line, and the parser refuses rather than guess.
#[test]
fn live_output_h_with_a_newline_in_a_name_is_refused() {
    let e = parse(&fixture("2.3.2-live-h.txt"), &raw("/tank/live/c")).unwrap_err();
    // Line 10 is the tab, which makes an extra field.
    assert_eq!(e.line, 10, "{e}");
    assert!(e.reason.contains("-h"), "{e}");
}

/// Without tabs or newlines in names, `-h` and escaped output agree.
#[test]
fn live_output_h_and_escaped_agree() {
    let m = "/tank/live/plain";
    let a = parse(&fixture("2.3.2-live-plain-escaped.txt"), &fmt(m)).unwrap();
    let b = parse(&fixture("2.3.2-live-plain-h.txt"), &raw(m)).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.len(), 6);
    assert_eq!(a[2].name, p("file with spaces.txt"));
}

/// A file unlinked while open when the snapshot was taken.
#[test]
fn live_on_delete_queue() {
    let got = parse(
        &fixture("2.3.2-live-on-delete-queue.txt"),
        &fmt("/tank/deleteq/c"),
    )
    .unwrap();
    assert_eq!(got[0].name, Name::OnDeleteQueue);
    assert_eq!(got[0].change, Change::Added);
    assert_eq!(got[1].name, Name::Root);
}
