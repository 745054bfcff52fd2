//! The `zfs diff` output parser (`diff::zfs::parse`) on arbitrary bytes.
//!
//! The first byte picks the format: bit 0 `-F` (type column), bit 1 `-t`
//! (ctime column), bit 2 `-h` (raw names), bits 3–4 the mountpoint.
//! Properties: no panic; one record per line; every parsed path is
//! relative, non-empty, of plain components only (no `..`, `.`, `//` or
//! NUL); a record written back as `zfs diff` would write it parses to the
//! same record; `unescape(escape(x)) == x` for any bytes.

use std::os::unix::ffi::OsStrExt;
use std::path::Component;

use jbuild::diff::zfs::parse::{
    escape, parse, parse_line, unescape, Change, FileType, Format, Name, Record,
};

const MOUNTPOINTS: [&[u8]; 4] = [b"/", b"", b"/jails/t", b"/z/a b/"];

fn check_name(name: &Name) {
    if let Name::Path(p) = name {
        let bytes = p.as_os_str().as_bytes();
        assert!(!bytes.is_empty(), "an empty path");
        assert!(!bytes.contains(&0), "a NUL in {p:?}");
        assert!(
            p.components().all(|c| matches!(c, Component::Normal(_))),
            "not a plain relative path: {p:?}"
        );
        assert!(!bytes.windows(2).any(|w| w == b"//") && !bytes.ends_with(b"/"));
    }
}

fn type_byte(t: FileType) -> u8 {
    match t {
        FileType::File => b'F',
        FileType::Dir => b'/',
        FileType::Symlink => b'@',
        FileType::Socket => b'=',
        FileType::Fifo => b'|',
        FileType::BlockDevice => b'B',
        FileType::CharDevice => b'C',
        FileType::Door => b'>',
        FileType::EventPort => b'P',
        FileType::Unknown => b'?',
    }
}

fn write_name(name: &Name, format: &Format) -> Vec<u8> {
    let mnt = format.mountpoint.as_slice();
    let mnt = if mnt == b"/" { &b""[..] } else { mnt };
    let mnt = mnt.strip_suffix(b"/").unwrap_or(mnt);
    let full = match name {
        Name::Root if mnt.is_empty() => b"/".to_vec(),
        Name::Root => mnt.to_vec(),
        Name::OnDeleteQueue => [mnt, b"(on_delete_queue)"].concat(),
        Name::Path(p) => [mnt, b"/", p.as_os_str().as_bytes()].concat(),
    };
    if format.raw_names {
        full
    } else {
        escape(&full).into_bytes()
    }
}

/// The line `zfs diff` would print for `r`.
fn write_line(r: &Record, format: &Format) -> Vec<u8> {
    let mut line = Vec::new();
    if let Some((s, ns)) = r.ctime {
        line.extend(format!("{s:>10}.{ns:09}\t").bytes());
    }
    line.push(match r.change {
        Change::Added => b'+',
        Change::Removed => b'-',
        Change::Modified => b'M',
        Change::Renamed => b'R',
    });
    line.push(b'\t');
    if let Some(t) = r.file_type {
        line.extend([type_byte(t), b'\t']);
    }
    line.extend(write_name(&r.name, format));
    if let Some(n) = &r.new_name {
        line.push(b'\t');
        line.extend(write_name(n, format));
    }
    if let Some(d) = r.link_delta {
        line.extend(format!("\t({d:+})").bytes());
    }
    line
}

/// The target's property checks on one input (see the module docs).
pub fn check_zfs_diff_parse(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    assert_eq!(unescape(escape(rest).as_bytes()).as_deref(), Ok(rest));
    let format = Format {
        mountpoint: MOUNTPOINTS[usize::from(sel >> 3) & 3].to_vec(),
        classify: sel & 1 != 0,
        timestamps: sel & 2 != 0,
        raw_names: sel & 4 != 0,
    };
    let Ok(records) = parse(rest, &format) else {
        return;
    };
    if !rest.is_empty() {
        let body = rest.strip_suffix(b"\n").unwrap_or(rest);
        assert_eq!(records.len(), body.split(|&b| b == b'\n').count());
    }
    for r in &records {
        check_name(&r.name);
        if let Some(n) = &r.new_name {
            check_name(n);
        }
        let line = write_line(r, &format);
        if format.raw_names && line.iter().filter(|&&b| b == b'\t').count() > 4 {
            continue; // a raw name with a tab cannot be written back
        }
        assert_eq!(
            parse_line(&line, &format).as_ref(),
            Ok(r),
            "written back as `{}`",
            escape(&line)
        );
    }
}
