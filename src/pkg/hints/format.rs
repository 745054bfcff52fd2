//! The hints file itself, as `include/elf-hints.h` defines it and
//! `sbin/ldconfig/elfhints.c` writes it: a 128-byte header of 32-bit
//! words (`magic` 0x746e6845 "Ehnt", `version` 1, `strtab`, `strsize`,
//! `dirlist`, `dirlistlen`, 26 spare words of zero), then the string
//! table, which here holds only the directory list: the directories
//! joined by `:` and one NUL.
//!
//! The words are in the target's byte order. ldconfig writes its own
//! machine's order unless `-B` forces big-endian, and reads a file in
//! either order (the magic tells which); a merge keeps the order of the
//! file it read (`read_elf_hints` sets `is_be` from the file). rtld reads
//! its native order, so jbuild writes the order of the image's own ELF
//! files (`image_machine` in the module above).

/// `ELFHINTS_MAGIC`.
pub const MAGIC: u32 = 0x746e_6845;
/// The header's size: six words and 26 spare ones.
pub const HEADER: usize = 32 * 4;
/// ldconfig's `MAXFILESIZE`: a longer hints file is refused when read.
pub const MAX_FILE: u64 = 16 * 1024;
/// ldconfig's `MAXDIRS`.
pub const MAX_DIRS: usize = 1024;

/// The byte order of the header's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Little,
    Big,
}

impl Order {
    fn put(self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&match self {
            Order::Little => v.to_le_bytes(),
            Order::Big => v.to_be_bytes(),
        });
    }

    fn get(self, b: &[u8], word: usize) -> u32 {
        let w: [u8; 4] = b[word * 4..word * 4 + 4].try_into().expect("4 bytes");
        match self {
            Order::Little => u32::from_le_bytes(w),
            Order::Big => u32::from_be_bytes(w),
        }
    }
}

/// The bytes of a hints file listing `dirs`, as `write_elf_hints` writes
/// them.
pub fn encode(dirs: &[String], order: Order) -> Vec<u8> {
    let list = dirs.join(":");
    let len = u32::try_from(list.len()).expect("bounded by MAX_DIRS paths");
    let mut out = Vec::with_capacity(HEADER + list.len() + 1);
    order.put(&mut out, MAGIC);
    order.put(&mut out, 1);
    order.put(&mut out, HEADER as u32);
    order.put(&mut out, len + 1);
    order.put(&mut out, 0);
    order.put(&mut out, len);
    out.resize(HEADER, 0);
    out.extend_from_slice(list.as_bytes());
    out.push(0);
    out
}

/// A hints file read back: its byte order and directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hints {
    pub order: Order,
    pub dirs: Vec<String>,
}

/// Reads a hints file as `read_elf_hints` does, in either byte order; the
/// error is ldconfig's message after the file's name.
pub fn decode(bytes: &[u8]) -> Result<Hints, &'static str> {
    if bytes.len() as u64 > MAX_FILE {
        return Err("is unreasonably large");
    }
    if bytes.len() < HEADER {
        return Err("invalid file format");
    }
    let order = if Order::Big.get(bytes, 0) == MAGIC {
        Order::Big
    } else if Order::Little.get(bytes, 0) == MAGIC {
        Order::Little
    } else {
        return Err("invalid file format");
    };
    if order.get(bytes, 1) != 1 {
        return Err("unrecognized file version");
    }
    let start = order.get(bytes, 2) as usize + order.get(bytes, 4) as usize;
    let rest = bytes.get(start..).ok_or("invalid file format")?;
    let end = rest
        .iter()
        .position(|&b| b == 0)
        .ok_or("invalid file format")?;
    let list = std::str::from_utf8(&rest[..end]).map_err(|_| "directory list is not UTF-8")?;
    let dirs = if list.is_empty() {
        Vec::new()
    } else {
        list.split(':').map(str::to_string).collect()
    };
    Ok(Hints { order, dirs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_both_orders() {
        let dirs = vec!["/lib".to_string(), "/usr/local/lib".to_string()];
        for order in [Order::Little, Order::Big] {
            let bytes = encode(&dirs, order);
            assert_eq!(bytes.len(), HEADER + "/lib:/usr/local/lib".len() + 1);
            assert_eq!(
                decode(&bytes),
                Ok(Hints {
                    order,
                    dirs: dirs.clone()
                })
            );
        }
        assert_eq!(&encode(&dirs, Order::Little)[..4], b"Ehnt");
        assert_eq!(&encode(&dirs, Order::Big)[..4], b"tnhE");
    }

    #[test]
    fn an_empty_list_is_one_nul() {
        let bytes = encode(&[], Order::Little);
        assert_eq!(bytes.len(), HEADER + 1);
        assert_eq!(decode(&bytes).unwrap().dirs, Vec::<String>::new());
    }

    #[test]
    fn refuses_what_ldconfig_refuses() {
        assert_eq!(decode(&[0; 200]), Err("invalid file format"));
        let mut v2 = encode(&[], Order::Little);
        v2[4] = 2;
        assert_eq!(decode(&v2), Err("unrecognized file version"));
        assert_eq!(
            decode(&vec![0; 16 * 1024 + 1]),
            Err("is unreasonably large")
        );
    }
}
