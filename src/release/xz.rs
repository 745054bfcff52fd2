//! The xz decoder of the distribution sets: liblzma's multithreaded one,
//! which decodes the blocks of a set made by a multithreaded `xz` (every
//! block with its size in its header) on several cores at once, and the
//! rest as the single-threaded decoder does. `xz -d` (5.4) decodes on one
//! core; the decoder is what bounds a bootstrap.
//!
//! liblzma's multithreaded decoder reads one stream; a set may be several
//! streams one after another, with zero padding between them (as `xz -d`
//! accepts), so each stream gets a decoder of its own.

use std::io::{self, BufRead, BufReader, Read};

use liblzma::bufread::XzDecoder;
use liblzma::stream::MtStreamBuilder;

/// Memory the decoder may use for its threads before it decodes on fewer
/// (it never stops for memory: a set is checked by its sha256, not bounded
/// by its dictionary).
const MEMLIMIT_THREADING: u64 = 256 << 20;

/// The xz streams read from `r`, decoded.
pub(crate) fn decoder<R: Read>(r: R) -> io::Result<Streams<R>> {
    Ok(Streams {
        current: Some(stream(BufReader::with_capacity(1 << 20, r))?),
    })
}

/// What [`decoder`] returns: one stream's decoder at a time.
pub(crate) struct Streams<R: Read> {
    /// `None` once the input ended after a whole stream.
    current: Option<XzDecoder<BufReader<R>>>,
}

fn stream<R: Read>(input: BufReader<R>) -> io::Result<XzDecoder<BufReader<R>>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8) as u32);
    let raw = MtStreamBuilder::new()
        .threads(threads)
        .memlimit_threading(MEMLIMIT_THREADING)
        .memlimit_stop(u64::MAX)
        .decoder()
        .map_err(io::Error::other)?;
    Ok(XzDecoder::new_stream(input, raw))
}

impl<R: Read> Read for Streams<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(d) = self.current.as_mut() else {
                return Ok(0);
            };
            let n = d.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // A stream ended: padding, then the end or another stream.
            let mut input = self.current.take().expect("checked above").into_inner();
            let mut padding = 0usize;
            loop {
                let avail = input.fill_buf()?;
                if avail.is_empty() {
                    if padding % 4 != 0 {
                        return Err(bad(
                            "the padding after an xz stream is not a multiple of 4 bytes",
                        ));
                    }
                    return Ok(0);
                }
                let zeros = avail.iter().take_while(|&&b| b == 0).count();
                let more = zeros < avail.len();
                input.consume(zeros);
                padding += zeros;
                if more {
                    break;
                }
            }
            if padding % 4 != 0 {
                return Err(bad(
                    "the padding after an xz stream is not a multiple of 4 bytes",
                ));
            }
            self.current = Some(stream(input)?);
        }
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn xz(data: &[u8], threads: u32) -> Vec<u8> {
        let mut b = MtStreamBuilder::new();
        b.threads(threads).preset(1).block_size(64 << 10);
        let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), b.encoder().unwrap());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn decoded(input: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decoder(input)?.read_to_end(&mut out)?;
        Ok(out)
    }

    fn data(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(seed) ^ (i >> 9) as u8)
            .collect()
    }

    #[test]
    fn multi_block_streams_concatenated_and_padded_decode_whole() {
        let (a, b) = (data(700 << 10, 7), data(300 << 10, 13));
        let mut input = xz(&a, 2);
        assert!(decoded(&input).unwrap() == a, "one stream of many blocks");
        input.extend_from_slice(&[0; 8]);
        input.extend_from_slice(&xz(&b, 1));
        input.extend_from_slice(&[0; 4]);
        assert_eq!(
            decoded(&input).unwrap(),
            [a, b].concat(),
            "two streams, padded"
        );
    }

    #[test]
    fn bad_padding_truncation_and_trailing_garbage_are_errors() {
        let a = data(200 << 10, 3);
        let good = xz(&a, 2);
        let mut odd = good.clone();
        odd.extend_from_slice(&[0; 3]);
        assert!(decoded(&odd).is_err(), "3 bytes of padding");
        let mut garbage = good.clone();
        garbage.extend_from_slice(b"JUNK");
        assert!(decoded(&garbage).is_err(), "not a stream after the first");
        assert!(decoded(&good[..good.len() - 10]).is_err(), "truncated");
    }
}
