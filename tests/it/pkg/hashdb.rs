//! `jbuild::pkg::hashdb`: Berkeley DB 1.85 hash files read back by Debian's
//! `db_dump185` (libdb1-compat), an independent reader: every pair,
//! byte-exact, in both byte orders and the bucket sizes FreeBSD's tools
//! ask for; a table grown past its first split point; keys of one hash on
//! overflow pages; empty data; a pair as big as a page takes; the same
//! bytes twice. Each key is also looked up through the library's `get`
//! (`/lib/libdb1.so.2` of the same package), as libc's `getpwnam` finds
//! it: a pair in the wrong bucket is dumped but not found.

use jbuild::pkg::hashdb::{self, Order, Params};

use super::dump185::{assert_found, pairs as dump, sorted};

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn written(params: &Params, pairs: &Pairs) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    std::fs::write(&path, hashdb::write(params, pairs).unwrap()).unwrap();
    (dir, path)
}

/// The header's words (always big-endian).
fn header_word(bytes: &[u8], index: usize) -> u32 {
    u32::from_be_bytes(bytes[4 * index..4 * index + 4].try_into().unwrap())
}

/// `n` pairs of varied sizes, data an encoding of the key's number.
fn many(n: usize) -> Pairs {
    (0..n)
        .map(|i| {
            let key = format!("A{}-{}", "user".repeat(i % 7), i).into_bytes();
            let mut data = (i as u32).to_be_bytes().to_vec();
            data.extend(std::iter::repeat_n(b':', i % 90));
            data.push(0);
            (key, data)
        })
        .collect()
}

#[test]
fn many_pairs_in_a_grown_table_read_back_byte_exact_in_both_orders() {
    let pairs = many(3000);
    for order in [Order::Big, Order::Little] {
        let params = Params {
            order,
            ..Params::PWD_MKDB
        };
        let (_d, path) = written(&params, &pairs);
        let bytes = std::fs::read(&path).unwrap();
        let max_bucket = header_word(&bytes, 10);
        let high_mask = header_word(&bytes, 11);
        // pwd_mkdb's nelem 256 / ffactor 32 starts at 8 buckets; 3000
        // pairs at most 32 a bucket take more, and a table between two
        // doublings has its high mask above its last bucket.
        assert!(max_bucket > 7, "max_bucket {max_bucket}");
        assert!(high_mask > max_bucket, "high {high_mask} max {max_bucket}");
        assert_eq!(
            header_word(&bytes, 2),
            if order == Order::Big { 4321 } else { 1234 }
        );
        assert_eq!(sorted(dump(&path)), sorted(pairs.clone()), "{order:?}");
        assert_found(&path, &pairs);
    }
}

#[test]
fn small_pages_empty_data_and_a_pair_as_big_as_a_page_takes() {
    for order in [Order::Big, Order::Little] {
        let params = Params::services_mkdb(order);
        let mut pairs: Pairs = vec![
            (b"empty".to_vec(), Vec::new()),
            (b"\xff22/tcp\0".to_vec(), b"7\0".to_vec()),
            // 256 − 14: the most one 256-byte page holds.
            (b"big".to_vec(), vec![b'x'; 256 - 14 - 3]),
            (b"nul\0in\0key".to_vec(), b"\\ and \x01\x7f\xff".to_vec()),
        ];
        pairs.extend(many(400));
        let (_d, path) = written(&params, &pairs);
        assert_eq!(sorted(dump(&path)), sorted(pairs.clone()), "{order:?}");
        assert_found(&path, &pairs);
    }
}

#[test]
fn keys_of_one_hash_go_on_overflow_pages_and_read_back() {
    // h·33 + c: "b!" and "aB" hash alike, and so does any string of them.
    let blocks = [b"b!", b"aB"];
    let mut pairs: Pairs = Vec::new();
    for n in 0u32..128 {
        let mut key = Vec::new();
        for bit in 0..7 {
            key.extend_from_slice(blocks[((n >> bit) & 1) as usize]);
        }
        pairs.push((key, vec![b'0' + (n % 10) as u8; 150]));
    }
    let first = hashdb::hash(&pairs[0].0);
    assert!(pairs.iter().all(|(k, _)| hashdb::hash(k) == first));
    for params in [Params::PWD_MKDB, Params::cap_mkdb(Order::Little)] {
        let (_d, path) = written(&params, &pairs);
        // 128 pairs of 168 bytes in one bucket: several pages chained.
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len > 4 * 4096, "{len}");
        assert_eq!(sorted(dump(&path)), sorted(pairs.clone()));
        assert_found(&path, &pairs);
    }
}

#[test]
fn no_pairs_is_a_valid_empty_table() {
    let (_d, path) = written(&Params::PWD_MKDB, &Vec::new());
    assert!(dump(&path).is_empty());
}

#[test]
fn the_same_pairs_give_the_same_bytes() {
    let pairs = many(500);
    let a = hashdb::write(&Params::PWD_MKDB, &pairs).unwrap();
    let b = hashdb::write(&Params::PWD_MKDB, &pairs).unwrap();
    assert_eq!(a, b);
    let c = hashdb::write(&Params::services_mkdb(Order::Little), &pairs).unwrap();
    assert_ne!(a, c);
}
