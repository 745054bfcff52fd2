//! Debian's `db_dump185` (libdb1-compat), the independent reader of the
//! Berkeley DB 1.85 hash files jbuild writes: its `-p` output parsed back
//! into pairs, byte-exact.

use std::path::Path;
use std::process::Command;

/// Every (key, data) pair of the hash file at `path`, in the reader's
/// order, as `db_dump185 -p` prints them (a header ending `HEADER=END`,
/// then a line per key and per data item; `\\` for a backslash, `\xx` in
/// hex for a byte that does not print).
pub fn pairs(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let out = Command::new("db_dump185")
        .arg("-p")
        .arg(path)
        .output()
        .expect("db_dump185 runs (Debian's libdb1-compat; tests/run installs it)");
    assert!(
        out.status.success(),
        "db_dump185 -p {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = out.stdout;
    let mut lines = text.split(|&b| b == b'\n');
    for line in lines.by_ref() {
        if line == b"HEADER=END" {
            break;
        }
    }
    let mut items: Vec<Vec<u8>> = lines.map(unescape).collect();
    // The output ends with a newline: the last split is no item.
    assert_eq!(
        items.pop(),
        Some(Vec::new()),
        "db_dump185's output ends a line"
    );
    assert!(items.len() % 2 == 0, "keys and data pair up");
    items
        .chunks(2)
        .map(|c| (c[0].clone(), c[1].clone()))
        .collect()
}

fn unescape(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' {
            if s[i + 1] == b'\\' {
                out.push(b'\\');
                i += 2;
            } else {
                let hex = std::str::from_utf8(&s[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// The pairs sorted, for comparing sets.
pub fn sorted(mut pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    pairs.sort();
    pairs
}

/// Looks every key of `keys` up in the hash file at `path` through the
/// same library's `get` (libdb1's `dbopen`, called from Python's ctypes):
/// what `getpwnam` does, so a pair filed in the wrong bucket is missed
/// although a sequential dump finds it. The data found for each key, or
/// `None`.
pub fn lookups(path: &Path, keys: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    const SCRIPT: &str = r#"
import ctypes, sys
lib = ctypes.CDLL("/lib/libdb1.so.2")
class DBT(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]
GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DBT), ctypes.POINTER(DBT), ctypes.c_uint)
class DB(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("close", ctypes.c_void_p), ("dele", ctypes.c_void_p),
                ("get", GET), ("put", ctypes.c_void_p), ("seq", ctypes.c_void_p),
                ("sync", ctypes.c_void_p), ("internal", ctypes.c_void_p), ("fd", ctypes.c_void_p)]
lib.dbopen.restype = ctypes.POINTER(DB)
lib.dbopen.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
db = lib.dbopen(sys.argv[1].encode(), 0, 0, 1, None)
if not db:
    sys.exit("dbopen failed")
for line in sys.stdin.read().split():
    k = bytes.fromhex(line)
    buf = ctypes.create_string_buffer(k, len(k))
    key = DBT(ctypes.cast(buf, ctypes.c_void_p), len(k))
    data = DBT()
    r = db.contents.get(db, ctypes.byref(key), ctypes.byref(data), 0)
    if r == 0:
        print(ctypes.string_at(data.data, data.size).hex() or "=")
    elif r == 1:
        print("-")
    else:
        sys.exit("get failed")
"#;
    use std::io::Write;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut input = String::new();
    for k in keys {
        // An empty key cannot be written as hex on its own line.
        assert!(!k.is_empty(), "lookups take non-empty keys");
        input.push_str(&hex(k));
        input.push('\n');
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "lookups in {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| match l {
            "-" => None,
            "=" => Some(Vec::new()),
            h => Some(
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                    .collect(),
            ),
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Asserts that the library finds every pair of `pairs` by its key, and
/// no data for a key it was not given.
pub fn assert_found(path: &Path, pairs: &[(Vec<u8>, Vec<u8>)]) {
    let mut keys: Vec<Vec<u8>> = pairs.iter().map(|(k, _)| k.clone()).collect();
    keys.push(b"\x01no such key".to_vec());
    let found = lookups(path, &keys);
    for ((k, d), f) in pairs.iter().zip(&found) {
        assert_eq!(f.as_ref(), Some(d), "get {:?}", String::from_utf8_lossy(k));
    }
    assert_eq!(found.last().unwrap(), &None);
}
