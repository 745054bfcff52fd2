//! A writer of Berkeley DB 1.85 hash files, the format FreeBSD's C library
//! reads `/etc/pwd.db`, `/etc/spwd.db`, `/var/db/services.db` and
//! `/etc/login.conf.db` in (`lib/libc/db/hash/` in FreeBSD's sources:
//! `hash.h` for the header, `page.h` for a page, `hash.c` and
//! `hash_page.c` for where pages go, `hash_func.c` for the hash).
//!
//! Why our own code: no Rust crate writes this format (the `db185` crate
//! reads B-trees only), and linking a C `libdb1` would make jbuild's build
//! depend on a library Debian ships only as a compatibility package and
//! FreeBSD keeps inside libc. The format is small: a header, bucket pages,
//! overflow pages and one bitmap page.
//!
//! # What is written
//!
//! The table FreeBSD's `dbopen(…, DB_HASH, &info)` leaves after the same
//! pairs are put, in structure: the header (always big-endian, as
//! `flush_meta` writes it), `hdrpages` header pages, then the bucket
//! pages, the overflow pages at the split points `hash_page.c` gives them
//! (`BUCKET_TO_PAGE`, `OADDR_TO_PAGE`), and the first bitmap page where
//! `init_htab` puts it (overflow page 1 of the first split point). Pages
//! are in the byte order asked for ([`Order`]): `pwd_mkdb` asks for
//! big-endian, `services_mkdb` and `cap_mkdb` for the target's own unless
//! told `-b`/`-l`.
//!
//! The table starts as `init_htab` makes it for the caller's `nelem` and
//! `ffactor`, then grows by linear hashing (`__expand_table`: one bucket
//! split at a time, the masks moved as `hash.c` moves them) until no
//! bucket needs more than one page and the fill factor holds; a bucket
//! still too full (keys of one hash) goes on overflow pages, allocated
//! from the bitmap as `overflow_page` does. The result is a valid table
//! that FreeBSD's libc and Debian's `db_dump185` read; it is not
//! byte-identical to the file `pwd_mkdb` writes (that depends on the
//! order of its inserts and splits), which libc does not need.
//!
//! Same pairs in the same order, same parameters: same bytes. Pairs keep
//! their order within a bucket.
//!
//! # Refused (a [`HashDbError`])
//!
//! - a pair bigger than what one page holds (key + data more than
//!   `bsize − 14` bytes): libc writes those on "big pair" pages, jbuild
//!   does not; the account and service records this serves are far
//!   smaller (a `pwd.db` record is its `master.passwd` line plus 20 bytes,
//!   against 4082);
//! - a key given twice (the callers decide which pair wins, as
//!   `R_NOOVERWRITE` does for them);
//! - more than [`MAX_PAIRS`] pairs or [`MAX_INPUT`] bytes of keys and
//!   data, a table of more than [`MAX_BUCKETS`] buckets or overflow pages
//!   past the first bitmap page, a bucket size that is not a power of two
//!   from 256 to 32768.

use std::collections::HashSet;

/// The most pairs one file holds.
pub const MAX_PAIRS: usize = 1 << 20;
/// The most bytes of keys and data one file holds.
pub const MAX_INPUT: usize = 64 << 20;
/// The most buckets of a table: 256 segments of 256 buckets, the
/// directory `init_htab` makes (`DEF_DIRSIZE`), never grown.
pub const MAX_BUCKETS: u32 = 1 << 16;

const HASH_MAGIC: u32 = 0x061561;
const HASH_VERSION: u32 = 2;
/// Hashed into the header's `h_charkey`: a reader checks it to know the
/// table was written with its hash function (`CHARKEY` in `hash.h`, its
/// NUL included).
const CHARKEY: &[u8] = b"%$sniglet^&\0";
const NCACHED: usize = 32;
/// `sizeof(HASHHDR)`: 17 words, 32 spares, 32 16-bit bitmap addresses.
const HEADER_SIZE: usize = 17 * 4 + NCACHED * 4 + NCACHED * 2;
/// The header occupies at least this much (`MINHDRSIZE`).
const MIN_HEADER: usize = 512;
const DEF_SEGSIZE: u32 = 256;
const DEF_SEGSIZE_SHIFT: u32 = 8;
const DEF_DIRSIZE: u32 = 256;
const DEF_FFACTOR: u32 = 65536;
/// An overflow address is `split << 11 | page` (`SPLITSHIFT`).
const SPLIT_SHIFT: u32 = 11;
/// Two 16-bit offsets: what a pair costs in a page's index, and what an
/// overflow link costs (`OVFLSIZE`).
const INDEX_PAIR: usize = 4;
/// A fresh page's free space: its size less the count, free and offset
/// words (`PAGE_INIT`).
const PAGE_META: usize = 6;

/// Byte order of the pages (the header is big-endian whatever this is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Big,
    Little,
}

impl Order {
    /// `lorder` as the header records it (`BIG_ENDIAN` 4321,
    /// `LITTLE_ENDIAN` 1234).
    fn lorder(self) -> u32 {
        match self {
            Order::Big => 4321,
            Order::Little => 1234,
        }
    }

    fn u16(self, v: u16) -> [u8; 2] {
        match self {
            Order::Big => v.to_be_bytes(),
            Order::Little => v.to_le_bytes(),
        }
    }

    fn u32(self, v: u32) -> [u8; 4] {
        match self {
            Order::Big => v.to_be_bytes(),
            Order::Little => v.to_le_bytes(),
        }
    }
}

/// What `dbopen` is given in its `HASHINFO` (0 for the library's default,
/// as there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub bsize: u32,
    pub ffactor: u32,
    pub nelem: u32,
    pub order: Order,
}

impl Params {
    /// `pwd_mkdb`'s `openinfo`: 4096-byte buckets, fill factor 32, 256
    /// elements, big-endian.
    pub const PWD_MKDB: Params = Params {
        bsize: 4096,
        ffactor: 32,
        nelem: 256,
        order: Order::Big,
    };

    /// `services_mkdb`'s `hinfo`: 256-byte buckets, fill factor 4, 32768
    /// elements, the order given.
    pub fn services_mkdb(order: Order) -> Params {
        Params {
            bsize: 256,
            ffactor: 4,
            nelem: 32768,
            order,
        }
    }

    /// `cap_mkdb`'s `openinfo`: 4096-byte buckets, the rest the
    /// library's defaults, the order given.
    pub fn cap_mkdb(order: Order) -> Params {
        Params {
            bsize: 4096,
            ffactor: 0,
            nelem: 0,
            order,
        }
    }
}

/// Why no file was written.
#[derive(Debug, thiserror::Error)]
pub enum HashDbError {
    #[error(
        "a pair of {size} bytes (key {key:?}) does not fit one {bsize}-byte page of the hash \
         file (at most {max}); jbuild does not write big-pair pages"
    )]
    PairTooBig {
        key: String,
        size: usize,
        bsize: u32,
        max: usize,
    },
    #[error("the key {0:?} is given twice")]
    DuplicateKey(String),
    #[error("{what}: more than {max} for one hash file")]
    TooBig { what: &'static str, max: usize },
    #[error("bucket size {0} is not a power of two from 256 to 32768")]
    BadBucketSize(u32),
}

impl crate::blame::Blame for HashDbError {
    /// The pairs come from the image's files (its `master.passwd`, its
    /// `services`): too big or doubled is the input's.
    fn is_user_error(&self) -> bool {
        !matches!(self, HashDbError::BadBucketSize(_))
    }
}

/// The library's default hash (`hash4` in `hash_func.c`): `h·33 + c` over
/// the bytes, modulo 2³².
pub fn hash(key: &[u8]) -> u32 {
    key.iter().fold(0u32, |h, &c| {
        (h << 5).wrapping_add(h).wrapping_add(u32::from(c))
    })
}

/// `__log2`: the smallest `i` with `2^i >= n`.
fn log2(n: u32) -> u32 {
    let mut i = 0;
    while (1u64 << i) < u64::from(n) {
        i += 1;
    }
    i
}

/// The hash file holding `pairs`, in the layout the module docs give.
pub fn write(params: &Params, pairs: &[(Vec<u8>, Vec<u8>)]) -> Result<Vec<u8>, HashDbError> {
    let bsize = params.bsize;
    if !(256..=32768).contains(&bsize) || !bsize.is_power_of_two() {
        return Err(HashDbError::BadBucketSize(bsize));
    }
    let page = bsize as usize;
    if pairs.len() > MAX_PAIRS {
        return Err(HashDbError::TooBig {
            what: "pairs",
            max: MAX_PAIRS,
        });
    }
    let input: usize = pairs.iter().map(|(k, d)| k.len() + d.len()).sum();
    if input > MAX_INPUT {
        return Err(HashDbError::TooBig {
            what: "bytes of keys and data",
            max: MAX_INPUT,
        });
    }
    let max_pair = page - PAGE_META - 2 * INDEX_PAIR;
    let mut seen = HashSet::with_capacity(pairs.len());
    for (k, d) in pairs {
        if k.len() + d.len() > max_pair {
            return Err(HashDbError::PairTooBig {
                key: String::from_utf8_lossy(k).into_owned(),
                size: k.len() + d.len(),
                bsize,
                max: max_pair,
            });
        }
        if !seen.insert(k.as_slice()) {
            return Err(HashDbError::DuplicateKey(
                String::from_utf8_lossy(k).into_owned(),
            ));
        }
    }
    let table = Table::grow(params, pairs, input)?;
    Ok(table.render(params, pairs))
}

/// The buckets and their pairs once the table has grown.
struct Table {
    /// The first split point (`init_htab`'s `l2`).
    l2: u32,
    max_bucket: u32,
    high_mask: u32,
    low_mask: u32,
    ffactor: u32,
    hashes: Vec<u32>,
    /// Pair indices by bucket, in the callers' order.
    buckets: Vec<Vec<usize>>,
}

impl Table {
    fn bucket_of(&self, h: u32) -> u32 {
        let b = h & self.high_mask;
        if b > self.max_bucket {
            b & self.low_mask
        } else {
            b
        }
    }

    /// `init_htab` for `nelem`, then splits (`__expand_table`) until every
    /// bucket fits one page and the fill factor holds, or the table is as
    /// big as is useful for this input.
    fn grow(
        params: &Params,
        pairs: &[(Vec<u8>, Vec<u8>)],
        input: usize,
    ) -> Result<Table, HashDbError> {
        let ffactor = if params.ffactor == 0 {
            DEF_FFACTOR
        } else {
            params.ffactor
        };
        let nelem = params.nelem.max(1);
        let l2 = log2(((nelem - 1) / ffactor + 1).max(2));
        if (1u32 << l2) > MAX_BUCKETS {
            return Err(HashDbError::TooBig {
                what: "buckets",
                max: MAX_BUCKETS as usize,
            });
        }
        let nbuckets = 1u32 << l2;
        let page = params.bsize as usize;
        let room = page - PAGE_META - INDEX_PAIR;
        let cost = |i: usize| INDEX_PAIR + pairs[i].0.len() + pairs[i].1.len();
        // Enough buckets that the bytes fit four times over and the fill
        // factor can hold; past that, more buckets would only spread keys
        // of one hash across empty pages.
        let min_pages = input / room + 1;
        let cap = (nbuckets as usize)
            .max(pairs.len() / ffactor as usize + 1)
            .max(4 * min_pages)
            .min(MAX_BUCKETS as usize) as u32;

        let hashes: Vec<u32> = pairs.iter().map(|(k, _)| hash(k)).collect();
        let mut t = Table {
            l2,
            max_bucket: nbuckets - 1,
            low_mask: nbuckets - 1,
            high_mask: (nbuckets << 1) - 1,
            ffactor,
            hashes,
            buckets: vec![Vec::new(); nbuckets as usize],
        };
        let mut sizes = vec![0usize; nbuckets as usize];
        for i in 0..pairs.len() {
            let b = t.bucket_of(t.hashes[i]) as usize;
            t.buckets[b].push(i);
            sizes[b] += cost(i);
        }
        let mut overfull = sizes.iter().filter(|&&s| s > room).count();
        while (overfull > 0 || pairs.len() / (t.max_bucket as usize + 1) > ffactor as usize)
            && t.max_bucket + 1 < cap
        {
            let new = t.max_bucket + 1;
            let old = (new & t.low_mask) as usize;
            t.max_bucket = new;
            if new > t.high_mask {
                t.low_mask = t.high_mask;
                t.high_mask = new | t.low_mask;
            }
            let moving = std::mem::take(&mut t.buckets[old]);
            if sizes[old] > room {
                overfull -= 1;
            }
            sizes[old] = 0;
            let mut stay = Vec::with_capacity(moving.len());
            let mut went = Vec::new();
            let mut went_size = 0;
            for i in moving {
                if t.bucket_of(t.hashes[i]) == new {
                    went_size += cost(i);
                    went.push(i);
                } else {
                    sizes[old] += cost(i);
                    stay.push(i);
                }
            }
            overfull += usize::from(sizes[old] > room) + usize::from(went_size > room);
            t.buckets[old] = stay;
            t.buckets.push(went);
            sizes.push(went_size);
        }
        Ok(t)
    }

    /// The file's bytes: header, bucket pages, overflow pages, bitmap.
    fn render(&self, params: &Params, pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let page = params.bsize as usize;
        let order = params.order;
        let bshift = params.bsize.trailing_zeros();
        let hdrpages = ((HEADER_SIZE.max(MIN_HEADER) - 1) >> bshift) + 1;
        let l2 = self.l2 as usize;
        let ovfl_point = log2(self.max_bucket + 1) as usize;

        // spares as init_htab and __expand_table leave them before any
        // overflow page: the l2 + 1 pages of the first split point (the
        // bitmap and l2 free ones), which init_htab also writes one split
        // point further and each split carries to the next.
        let mut spares = [0u32; NCACHED];
        for s in spares.iter_mut().take(ovfl_point.max(l2 + 1) + 1).skip(l2) {
            *s = self.l2 + 1;
        }
        // Bit i of the bitmap is overflow page i + 1 (__ibitmap): bit 0 the
        // bitmap itself, 1..=l2 free, the rest past the end, set.
        let bits = page * 8;
        let mut bitmap = vec![u32::MAX; page / 4];
        let nbits = self.l2 + 1;
        let clearints = (((nbits - 1) >> 5) + 1) as usize;
        for w in bitmap.iter_mut().take(clearints) {
            *w = 0;
        }
        bitmap[clearints - 1] = u32::MAX << (nbits & 31);
        bitmap[0] |= 1;
        let mut last_freed: u32 = 2;

        let bucket_page = |b: u32, spares: &[u32; NCACHED]| -> usize {
            let extra = if b == 0 {
                0
            } else {
                spares[log2(b + 1) as usize - 1]
            };
            b as usize + hdrpages + extra as usize
        };

        // Each bucket's pages: greedy, in order, each page keeping room
        // for the overflow link (PAIRFITS).
        let room = page - PAGE_META - INDEX_PAIR;
        let mut chains: Vec<Vec<Vec<usize>>> = Vec::with_capacity(self.buckets.len());
        for b in &self.buckets {
            let mut chain: Vec<Vec<usize>> = vec![Vec::new()];
            let mut used = 0;
            for &i in b {
                let c = INDEX_PAIR + pairs[i].0.len() + pairs[i].1.len();
                if used + c > room {
                    chain.push(Vec::new());
                    used = 0;
                }
                used += c;
                chain.last_mut().expect("a chain has a page").push(i);
            }
            chains.push(chain);
        }

        // Overflow pages, allocated bucket by bucket as overflow_page does:
        // a free bit of the bitmap first, else a new page at ovfl_point.
        let mut links: Vec<Vec<u16>> = Vec::with_capacity(chains.len());
        for chain in &chains {
            let mut addrs = Vec::new();
            for _ in 1..chain.len() {
                let in_use = spares[ovfl_point] - 1;
                let free =
                    (1..=in_use).find(|&bit| bitmap[bit as usize / 32] & (1 << (bit % 32)) == 0);
                let (split, offset) = match free {
                    Some(bit) => {
                        bitmap[bit as usize / 32] |= 1 << (bit % 32);
                        let number = bit + 1;
                        if number >= last_freed {
                            last_freed = number - 1;
                        }
                        let mut i = 0;
                        while i < ovfl_point && number > spares[i] {
                            i += 1;
                        }
                        let off = if i > 0 {
                            number - spares[i - 1]
                        } else {
                            number
                        };
                        (i as u32, off)
                    }
                    None => {
                        last_freed = spares[ovfl_point];
                        spares[ovfl_point] += 1;
                        let number = spares[ovfl_point];
                        assert!(
                            (number as usize) < bits,
                            "overflow pages are bounded by the bucket cap"
                        );
                        bitmap[(number - 1) as usize / 32] |= 1 << ((number - 1) % 32);
                        let off = number
                            - if ovfl_point > 0 {
                                spares[ovfl_point - 1]
                            } else {
                                0
                            };
                        (ovfl_point as u32, off)
                    }
                };
                addrs.push(((split << SPLIT_SHIFT) | offset) as u16);
            }
            links.push(addrs);
        }
        let oaddr_page = |addr: u16, spares: &[u32; NCACHED]| -> usize {
            let split = u32::from(addr) >> SPLIT_SHIFT;
            let off = u32::from(addr) & ((1 << SPLIT_SHIFT) - 1);
            bucket_page((1 << split) - 1, spares) + off as usize
        };

        // Where every page goes, then the file.
        let bitmap_addr = ((self.l2 << SPLIT_SHIFT) | 1) as u16;
        let mut last = oaddr_page(bitmap_addr, &spares);
        last = last.max(bucket_page(self.max_bucket, &spares));
        for addrs in &links {
            for &a in addrs {
                last = last.max(oaddr_page(a, &spares));
            }
        }
        let mut out = vec![0u8; (last + 1) * page];
        for (b, chain) in chains.iter().enumerate() {
            let mut at = bucket_page(b as u32, &spares);
            for (n, members) in chain.iter().enumerate() {
                let next = links[b].get(n).copied();
                let bytes = page_bytes(page, order, members, pairs, next);
                out[at * page..(at + 1) * page].copy_from_slice(&bytes);
                if let Some(a) = next {
                    at = oaddr_page(a, &spares);
                }
            }
        }
        let at = oaddr_page(bitmap_addr, &spares) * page;
        for (i, w) in bitmap.iter().enumerate() {
            out[at + 4 * i..at + 4 * i + 4].copy_from_slice(&order.u32(*w));
        }

        let h = self.header(
            params,
            hdrpages,
            ovfl_point,
            last_freed,
            &spares,
            bitmap_addr,
            pairs.len(),
        );
        out[..HEADER_SIZE].copy_from_slice(&h);
        out
    }

    /// `HASHHDR`, big-endian whatever the pages' order (`flush_meta`).
    #[allow(clippy::too_many_arguments)]
    fn header(
        &self,
        params: &Params,
        hdrpages: usize,
        ovfl_point: usize,
        last_freed: u32,
        spares: &[u32; NCACHED],
        bitmap_addr: u16,
        nkeys: usize,
    ) -> Vec<u8> {
        let order = params.order;
        let bshift = params.bsize.trailing_zeros();
        let nsegs = (((1u32 << self.l2) - 1) / DEF_SEGSIZE + 1).next_power_of_two();
        let mut h = Vec::with_capacity(HEADER_SIZE);
        let words: [u32; 17] = [
            HASH_MAGIC,
            HASH_VERSION,
            order.lorder(),
            params.bsize,
            bshift,
            DEF_DIRSIZE.max(nsegs),
            DEF_SEGSIZE,
            DEF_SEGSIZE_SHIFT,
            ovfl_point as u32,
            last_freed,
            self.max_bucket,
            self.high_mask,
            self.low_mask,
            self.ffactor,
            nkeys as u32,
            hdrpages as u32,
            hash(CHARKEY),
        ];
        for w in words {
            h.extend_from_slice(&w.to_be_bytes());
        }
        for s in spares.iter() {
            h.extend_from_slice(&s.to_be_bytes());
        }
        let mut bitmaps = [0u16; NCACHED];
        bitmaps[0] = bitmap_addr;
        for b in bitmaps {
            h.extend_from_slice(&b.to_be_bytes());
        }
        h
    }
}

/// One page: the index (`n`, the pairs' key and data offsets, an
/// overflow link if `next`, free space, start of data), then the keys and
/// data packed from the end, each key above its data (`putpair`).
fn page_bytes(
    page: usize,
    order: Order,
    members: &[usize],
    pairs: &[(Vec<u8>, Vec<u8>)],
    next: Option<u16>,
) -> Vec<u8> {
    let mut bytes = vec![0u8; page];
    let mut index: Vec<u16> = Vec::with_capacity(2 * members.len() + 4);
    let mut off = page;
    for &i in members {
        let (k, d) = &pairs[i];
        off -= k.len();
        bytes[off..off + k.len()].copy_from_slice(k);
        index.push(off as u16);
        off -= d.len();
        bytes[off..off + d.len()].copy_from_slice(d);
        index.push(off as u16);
    }
    if let Some(addr) = next {
        // __add_ovflpage: the link is a pseudo-pair (address, OVFLPAGE 0).
        index.push(addr);
        index.push(0);
    }
    let n = index.len();
    let free = off - (n + 3) * 2;
    let mut words = Vec::with_capacity(n + 3);
    words.push(n as u16);
    words.extend_from_slice(&index);
    words.push(free as u16);
    words.push(off as u16);
    for (j, w) in words.iter().enumerate() {
        bytes[2 * j..2 * j + 2].copy_from_slice(&order.u16(*w));
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_hash_of_charkey_is_what_readers_check() {
        // The value a FreeBSD libc computes for CHARKEY (notes §7.3).
        assert_eq!(hash(CHARKEY), 0x956e_7de3);
    }

    #[test]
    fn a_pair_too_big_for_a_page_is_refused_naming_its_key() {
        let pairs = vec![(b"k".to_vec(), vec![0u8; 4096 - 14])];
        let err = write(&Params::PWD_MKDB, &pairs).unwrap_err();
        assert!(err.to_string().contains("\"k\""), "{err}");
        let fits = vec![(b"k".to_vec(), vec![0u8; 4096 - 15])];
        write(&Params::PWD_MKDB, &fits).unwrap();
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let pairs = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"a".to_vec(), b"2".to_vec()),
        ];
        assert!(matches!(
            write(&Params::PWD_MKDB, &pairs),
            Err(HashDbError::DuplicateKey(_))
        ));
    }
}
