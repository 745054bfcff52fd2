//! FreeBSD file flags (`chflags(1)`) in layers: the `SCHILY.fflags` PAX
//! record, spelt as bsdtar (libarchive) spells it, e.g. `schg,uappnd`.
//!
//! The mapping is pure and works on every platform (so it is tested on
//! Linux). Reading and setting a path's flags goes through
//! [`crate::fsutil::flags::FileFlags`], which says when each is done.
//! Flags libarchive has no name for are not carried.

/// Flag bits, as in FreeBSD's `<sys/stat.h>`.
pub const UF_NODUMP: u32 = 0x0000_0001;
pub const UF_IMMUTABLE: u32 = 0x0000_0002;
pub const UF_APPEND: u32 = 0x0000_0004;
pub const UF_OPAQUE: u32 = 0x0000_0008;
pub const UF_NOUNLINK: u32 = 0x0000_0010;
pub const UF_SYSTEM: u32 = 0x0000_0080;
pub const UF_SPARSE: u32 = 0x0000_0100;
pub const UF_OFFLINE: u32 = 0x0000_0200;
pub const UF_REPARSE: u32 = 0x0000_0400;
pub const UF_READONLY: u32 = 0x0000_1000;
pub const UF_HIDDEN: u32 = 0x0000_8000;
pub const SF_ARCHIVED: u32 = 0x0001_0000;
pub const SF_IMMUTABLE: u32 = 0x0002_0000;
pub const SF_APPEND: u32 = 0x0004_0000;
pub const SF_NOUNLINK: u32 = 0x0010_0000;

/// libarchive's table, in its order (which is the order names are
/// written in): the preferred name first, then other accepted spellings.
const FLAGS: &[(u32, &[&str])] = &[
    (SF_APPEND, &["sappnd", "sappend"]),
    (SF_ARCHIVED, &["arch", "archived"]),
    (SF_IMMUTABLE, &["schg", "schange", "simmutable"]),
    (SF_NOUNLINK, &["sunlnk", "sunlink"]),
    (UF_APPEND, &["uappnd", "uappend"]),
    (UF_IMMUTABLE, &["uchg", "uchange", "uimmutable"]),
    (UF_NODUMP, &["nodump"]),
    (UF_OPAQUE, &["opaque"]),
    (UF_NOUNLINK, &["uunlnk", "uunlink"]),
    (UF_HIDDEN, &["hidden", "uhidden"]),
    (UF_OFFLINE, &["offline", "uoffline"]),
    (UF_READONLY, &["rdonly", "urdonly", "readonly"]),
    (UF_SPARSE, &["sparse", "usparse"]),
    (UF_REPARSE, &["reparse", "ureparse"]),
    (UF_SYSTEM, &["system", "usystem"]),
];

/// Flags that stop a file from being changed or removed: set last when
/// applying, cleared first when replacing.
pub const LOCKING: u32 =
    SF_APPEND | SF_IMMUTABLE | SF_NOUNLINK | UF_APPEND | UF_IMMUTABLE | UF_NOUNLINK;

/// The `SCHILY.fflags` value for `flags`, or `None` when no flag with a
/// name is set.
pub fn to_text(flags: u32) -> Option<String> {
    let names: Vec<&str> = FLAGS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, names)| names[0])
        .collect();
    if names.is_empty() {
        None
    } else {
        Some(names.join(","))
    }
}

/// The flags named in a `SCHILY.fflags` value. Names may be separated by
/// commas, spaces or tabs; unknown names are ignored (as libarchive does),
/// and `noX` (which clears X) sets nothing.
pub fn from_text(text: &str) -> u32 {
    let mut flags = 0;
    for token in text.split([',', ' ', '\t']).filter(|t| !t.is_empty()) {
        for (bit, names) in FLAGS {
            if names.contains(&token) {
                flags |= bit;
            }
        }
    }
    flags
}

#[cfg(target_os = "freebsd")]
const _: () = {
    assert!(UF_NODUMP as libc::c_ulong == libc::UF_NODUMP);
    assert!(SF_IMMUTABLE as libc::c_ulong == libc::SF_IMMUTABLE);
    assert!(UF_READONLY as libc::c_ulong == libc::UF_READONLY);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_bsdtar_writes_them() {
        assert_eq!(to_text(0), None);
        assert_eq!(
            to_text(SF_IMMUTABLE | UF_APPEND).as_deref(),
            Some("schg,uappnd")
        );
        assert_eq!(
            to_text(UF_NODUMP | SF_APPEND | UF_HIDDEN).as_deref(),
            Some("sappnd,nodump,hidden")
        );
        // A bit libarchive has no name for is not carried.
        assert_eq!(to_text(0x0000_0800), None);
    }

    #[test]
    fn parses_every_spelling() {
        assert_eq!(from_text("schg,uappnd"), SF_IMMUTABLE | UF_APPEND);
        assert_eq!(
            from_text("simmutable uchange\tnodump"),
            SF_IMMUTABLE | UF_IMMUTABLE | UF_NODUMP
        );
        assert_eq!(from_text("noschg,bogus,,"), 0);
        for (bit, _) in FLAGS {
            assert_eq!(from_text(&to_text(*bit).unwrap()), *bit);
        }
    }
}
