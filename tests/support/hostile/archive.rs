//! Crafted OCI archives for `tests/it/transport/hostile_archive.rs`, written as streams:
//! the largest has a 300 MiB long name, and none is ever held whole in the
//! test's memory either.

use std::io::{self, Write};

use super::{header, Head, Tar};

/// Writes an archive to a pipe; an error (the reader stopped reading,
/// having refused it) ends the writing.
pub type Writer = Box<dyn Fn(&mut dyn Write) -> io::Result<()> + Send + Sync>;

/// An archive held in memory (a small one).
pub fn bytes(b: Vec<u8>) -> Writer {
    Box::new(move |out| out.write_all(&b))
}

/// `len` bytes of `a`, in 1 MiB writes.
fn filler(out: &mut dyn Write, mut len: u64) -> io::Result<()> {
    let chunk = vec![b'a'; 1 << 20];
    while len > 0 {
        let n = len.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..n])?;
        len -= n as u64;
    }
    Ok(())
}

fn padding(out: &mut dyn Write, size: u64) -> io::Result<()> {
    out.write_all(&[0u8; 512][..(512 - (size % 512) as usize) % 512])
}

/// An extended header of type `kind` and `size` bytes, whose content
/// `body` writes, then one small file it would apply to, then the end.
fn extended(
    out: &mut dyn Write,
    kind: u8,
    size: u64,
    body: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let h = header(&Head {
        name: b"././@LongLink",
        kind,
        size,
        ..Head::default()
    });
    out.write_all(h.as_bytes())?;
    body(out)?;
    padding(out, size)?;
    out.write_all(&Tar::new().file(b"oci-layout", b"{}").finish())
}

/// A GNU long name (`L`) of `len` bytes.
pub fn gnu_long_name(len: u64) -> Writer {
    Box::new(move |out| {
        extended(out, b'L', len + 1, |out| {
            filler(out, len)?;
            out.write_all(&[0])
        })
    })
}

/// A PAX `key` record whose value has `len` bytes.
pub fn pax_record(key: &'static str, len: u64) -> Writer {
    Box::new(move |out| {
        // `<n> key=value\n`, where n counts its own digits.
        let rest = key.len() as u64 + len + 3;
        let mut n = rest + 1;
        while n != rest + n.to_string().len() as u64 {
            n = rest + n.to_string().len() as u64;
        }
        extended(out, b'x', n, |out| {
            write!(out, "{n} {key}=")?;
            filler(out, len)?;
            out.write_all(b"\n")
        })
    })
}
