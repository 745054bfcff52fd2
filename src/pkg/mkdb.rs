//! `services_mkdb` and `cap_mkdb`, the two other database builders the
//! base system runs from package scripts (the pkgbase runtime package's
//! post-install: `services_mkdb ${CAP_MKDB_ENDIAN} -q -o
//! ${PKG_ROOTDIR}/var/db/services.db ${PKG_ROOTDIR}/etc/services`), as
//! native commands writing [`crate::pkg::hashdb`] files inside the image.
//!
//! **`services_mkdb [-b | -l] [-q] [-o database] [file]`**
//! (`usr.sbin/services_mkdb/services_mkdb.c`): reads `file` (default
//! `/etc/services`), writes `database` (default `/var/db/services.db`,
//! mode 0644) as a hash of 256-byte buckets, fill factor 4, 32768
//! elements. For each (port, protocol), ports ascending and protocols in
//! the order the file first names them (at most 5), with `N` counting
//! from 0: key `"N\0"` → `"name port/proto alias… \0"` (each alias
//! followed by a space), and keys `"\xffport/proto\0"`, `"\xffport\0"`,
//! `"\xfename/proto\0"` and `"\xfename\0"` for the name and each alias →
//! `"N\0"`; a key already stored keeps its first value (warned about
//! unless `-q`). `-b`/`-l` choose big- or little-endian pages; without
//! either the target's own order ([`services_mkdb_for`]; the shared entry
//! [`services_mkdb`] takes little-endian, the order of every FreeBSD
//! target but powerpc64). `-u` is refused (usage, exit 1).
//!
//! **`cap_mkdb [-b | -l] [-v] [-f outfile] file...`**
//! (`usr.bin/cap_mkdb/cap_mkdb.c` over `getcap(3)`'s `cgetnext`): each
//! record of the files, in order, is stored under its names field (up to
//! the first `:`) as `0x00` + the record + NUL, with `tc=name`
//! capabilities expanded as `getent` expands them (`0x01` instead of
//! `0x00` when a `tc` names no record); when the names field has `|`,
//! each name maps to `0x02` + the names field. A record is its lines
//! joined where a line ends with `\`, the backslash and newline removed
//! and the next line's leading blanks kept. The database is `outfile.db`
//! (else the first file's name + `.db`), mode 0644, 4096-byte buckets,
//! the order as for `services_mkdb` ([`cap_mkdb_for`]).

use std::path::Path;

use crate::pkg::accounts::{confined, pw::Getopt, read_text, write_file};
use crate::pkg::hashdb::{self, Order, Params};
use crate::pkg::script::{CommandError, Io};

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Pairs stored with `R_NOOVERWRITE`: a key already there keeps its
/// value, and `put` reports it.
#[derive(Default)]
struct NoOverwrite {
    pairs: Pairs,
    seen: std::collections::HashSet<Vec<u8>>,
}

impl NoOverwrite {
    fn put(&mut self, key: Vec<u8>, data: Vec<u8>) -> bool {
        if !self.seen.insert(key.clone()) {
            return false;
        }
        self.pairs.push((key, data));
        true
    }
}

/// [`services_mkdb_for`] with little-endian as the target's order.
pub fn services_mkdb(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    services_mkdb_for(root, args, io, Order::Little)
}

/// `services_mkdb` (see the module docs); `native` is the target's order.
pub fn services_mkdb_for(
    root: &Path,
    args: &[String],
    io: &mut Io<'_>,
    native: Order,
) -> Result<i32, CommandError> {
    const USAGE: &str = "Usage:\tservices_mkdb [-b | -l] [-q] [-o <db>] [<servicefile>]\n\tservices_mkdb -u [<servicefile>]\n";
    let mut order = None;
    let mut quiet = false;
    let mut out = String::from("/var/db/services.db");
    let mut opts = Getopt::new(args, "blo:qu");
    for o in opts.by_ref() {
        match o {
            Ok((c @ ('b' | 'l'), _)) if order.is_none() => {
                order = Some(if c == 'b' { Order::Big } else { Order::Little })
            }
            Ok(('q', _)) => quiet = true,
            Ok(('o', Some(o))) => out = o,
            _ => {
                io.stderr.extend_from_slice(USAGE.as_bytes());
                return Ok(1);
            }
        }
    }
    let rest = opts.rest();
    if rest.len() > 1 {
        io.stderr.extend_from_slice(USAGE.as_bytes());
        return Ok(1);
    }
    let file = rest.first().map_or("/etc/services", |s| s.as_str());
    let host = confined(root, Path::new(file))?;
    if !host.is_file() {
        let msg = format!("services_mkdb: Cannot open `{file}': No such file or directory\n");
        io.stderr.extend_from_slice(msg.as_bytes());
        return Ok(1);
    }
    let text = read_text(root, &host)?;
    let (pairs, warnings) = match services_pairs(file, &text) {
        Ok(p) => p,
        Err(msg) => {
            io.stderr
                .extend_from_slice(format!("services_mkdb: {msg}\n").as_bytes());
            return Ok(1);
        }
    };
    for w in warnings {
        if !quiet || !w.starts_with("duplicate") {
            io.stderr
                .extend_from_slice(format!("services_mkdb: {w}\n").as_bytes());
        }
    }
    let params = Params::services_mkdb(order.unwrap_or(native));
    let bytes = hashdb::write(&params, &pairs).map_err(|e| CommandError::Other(Box::new(e)))?;
    write_file(root, &confined(root, Path::new(&out))?, &bytes, 0o644)?;
    Ok(0)
}

/// The pairs `services_mkdb` stores for `text`, and its warnings.
pub fn services_pairs(fname: &str, text: &str) -> Result<(Pairs, Vec<String>), String> {
    const PROTOMAX: usize = 5;
    let mut protos: Vec<String> = Vec::new();
    // Per port, per protocol index: the names, first seen first.
    let mut svc: std::collections::BTreeMap<u64, Vec<Option<Vec<String>>>> = Default::default();
    let mut warnings = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let body = line.split('#').next().unwrap_or("");
        let mut words = body.split([' ', '\t']).filter(|w| !w.is_empty());
        let Some(name) = words.next() else { continue };
        let Some(port) = words.next() else {
            warnings.push(format!("{fname}, {line_no}: no port found"));
            continue;
        };
        let Some((pnum, proto)) = port.split_once('/').filter(|(_, p)| !p.is_empty()) else {
            warnings.push(format!("{fname}, {line_no}: no protocol found"));
            continue;
        };
        let Some(pnum) = parse_port(pnum) else {
            warnings.push(format!("{fname}, {line_no}: invalid port `{pnum}'"));
            continue;
        };
        if pnum > 0xffff {
            warnings.push(format!("{fname}, {line_no}: port too big `{pnum}'"));
            continue;
        }
        let pindex = match protos.iter().position(|p| p == proto) {
            Some(i) => i,
            None if protos.len() == PROTOMAX => {
                return Err(format!(
                    "Ran out of protocols adding `{proto}'; recompile with larger PROTOMAX"
                ))
            }
            None => {
                protos.push(proto.to_string());
                protos.len() - 1
            }
        };
        let slots = svc.entry(pnum).or_insert_with(|| vec![None; PROTOMAX]);
        let names = slots[pindex].get_or_insert_with(Vec::new);
        for w in std::iter::once(name).chain(words) {
            if !names.iter().any(|x| x == w) {
                names.push(w.to_string());
            }
        }
    }
    let mut db = NoOverwrite::default();
    let mut cnt = 0usize;
    for (port, slots) in &svc {
        for (pi, names) in slots.iter().enumerate() {
            let Some(names) = names else { continue };
            let proto = &protos[pi];
            let index = format!("{cnt}\0").into_bytes();
            cnt += 1;
            let aliases: String = names[1..].iter().map(|a| format!("{a} ")).collect();
            let mut put = |key: Vec<u8>, data: Vec<u8>, db: &mut NoOverwrite| {
                let shown = String::from_utf8_lossy(&key[1..key.len() - 1]).into_owned();
                if !db.put(key, data) {
                    warnings.push(format!("duplicate service `{shown}'"));
                }
            };
            let marked = |m: u8, text: String| [vec![m], text.into_bytes()].concat();
            put(
                index.clone(),
                format!("{} {port}/{proto} {aliases}\0", names[0]).into_bytes(),
                &mut db,
            );
            put(
                marked(0xff, format!("{port}/{proto}\0")),
                index.clone(),
                &mut db,
            );
            put(marked(0xff, format!("{port}\0")), index.clone(), &mut db);
            for n in names {
                put(
                    marked(0xfe, format!("{n}/{proto}\0")),
                    index.clone(),
                    &mut db,
                );
                put(marked(0xfe, format!("{n}\0")), index.clone(), &mut db);
            }
        }
    }
    Ok((db.pairs, warnings))
}

/// `strtoul(port, &ep, 0)` with the whole word consumed: decimal, `0x`
/// hexadecimal or `0` octal.
fn parse_port(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    u64::from_str_radix(digits, radix).ok()
}

/// [`cap_mkdb_for`] with little-endian as the target's order.
pub fn cap_mkdb(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    cap_mkdb_for(root, args, io, Order::Little)
}

/// `cap_mkdb` (see the module docs); `native` is the target's order.
pub fn cap_mkdb_for(
    root: &Path,
    args: &[String],
    io: &mut Io<'_>,
    native: Order,
) -> Result<i32, CommandError> {
    const USAGE: &str = "usage: cap_mkdb [-b | -l] [-v] [-f outfile] file ...\n";
    let mut order = None;
    let mut verbose = false;
    let mut out: Option<String> = None;
    let mut opts = Getopt::new(args, "bf:lv");
    for o in opts.by_ref() {
        match o {
            Ok((c @ ('b' | 'l'), _)) if order.is_none() => {
                order = Some(if c == 'b' { Order::Big } else { Order::Little })
            }
            Ok(('f', f)) => out = f,
            Ok(('v', _)) => verbose = true,
            _ => {
                io.stderr.extend_from_slice(USAGE.as_bytes());
                return Ok(1);
            }
        }
    }
    let files = opts.rest();
    if files.is_empty() {
        io.stderr.extend_from_slice(USAGE.as_bytes());
        return Ok(1);
    }
    let mut texts = Vec::new();
    for f in files {
        let host = confined(root, Path::new(f))?;
        if !host.is_file() {
            io.stderr
                .extend_from_slice(b"cap_mkdb: file argument: No such file or directory\n");
            return Ok(1);
        }
        texts.push(read_text(root, &host)?);
    }
    let (pairs, warnings, count) = match cap_pairs(&texts) {
        Ok(p) => p,
        Err(msg) => {
            io.stderr
                .extend_from_slice(format!("cap_mkdb: {msg}\n").as_bytes());
            return Ok(1);
        }
    };
    for w in warnings {
        io.stderr
            .extend_from_slice(format!("cap_mkdb: {w}\n").as_bytes());
    }
    if verbose {
        io.stdout
            .extend_from_slice(format!("cap_mkdb: {count} capability records\n").as_bytes());
    }
    let name = format!("{}.db", out.as_deref().unwrap_or(&files[0]));
    let params = Params::cap_mkdb(order.unwrap_or(native));
    let bytes = hashdb::write(&params, &pairs).map_err(|e| CommandError::Other(Box::new(e)))?;
    write_file(root, &confined(root, Path::new(&name))?, &bytes, 0o644)?;
    Ok(0)
}

/// The records of capability files, each its lines joined (`getent`).
fn records(texts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for text in texts {
        let mut cur = String::new();
        for line in text.split('\n') {
            cur.push_str(line);
            if cur.ends_with('\\') {
                cur.pop();
                continue;
            }
            let rec = std::mem::take(&mut cur);
            if !rec.is_empty() && !rec.starts_with('#') {
                out.push(rec);
            }
        }
    }
    out
}

/// Whether `name` is one of the record's names (`cgetmatch`).
fn matches(record: &str, name: &str) -> bool {
    let names = record.split(':').next().unwrap_or("");
    names.split('|').any(|n| n == name)
}

/// The record named `name` with its `tc=` expanded, and whether every
/// `tc` was found (`getent`): `Err` past 32 levels (a loop).
fn expand(all: &[String], name: &str, depth: usize) -> Result<Option<(String, bool)>, String> {
    if depth >= 32 {
        return Err("potential reference loop detected".into());
    }
    let Some(rec) = all
        .iter()
        .find(|r| r.split(':').next().is_some_and(|_| matches(r, name)))
    else {
        return Ok(None);
    };
    let mut rec = rec.clone();
    let mut resolved = true;
    let mut scan = rec.find(':').unwrap_or(rec.len());
    while let Some(at) = rec[scan..].find(":tc=").map(|i| scan + i + 1) {
        let end = rec[at..].find(':').map_or(rec.len(), |i| at + i + 1);
        let target = rec[at + 3..end].trim_end_matches(':').to_string();
        match expand(all, &target, depth + 1)? {
            Some((sub, ok)) => {
                resolved &= ok;
                let mut caps = sub[sub.find(':').map_or(sub.len(), |i| i + 1)..].to_string();
                if !caps.ends_with(':') {
                    caps.push(':');
                }
                rec.replace_range(at..end, &caps);
                scan = at + caps.len() - 1;
            }
            None => {
                resolved = false;
                scan = end.saturating_sub(1).max(at);
            }
        }
    }
    Ok(Some((rec, resolved)))
}

/// What `cap_mkdb` stores for the files' texts, its warnings, and the
/// number of records.
pub fn cap_pairs(texts: &[String]) -> Result<(Pairs, Vec<String>, usize), String> {
    let all = records(texts);
    let mut db = NoOverwrite::default();
    let mut warnings = Vec::new();
    let mut count = 0;
    for rec in all.iter().filter(|r| !r.starts_with([' ', '\t', ':'])) {
        let first = rec.split([':', '|']).next().unwrap_or("");
        let Some((full, ok)) = expand(&all, first, 0)? else {
            continue;
        };
        let Some(colon) = full.find(':') else {
            warnings.push(format!("no name field: {}", &full[..full.len().min(20)]));
            continue;
        };
        if !ok {
            warnings.push(format!("record not tc expanded: {}", &full[..colon]));
        }
        let names = &full[..colon];
        let mut data = vec![if ok { 0u8 } else { 1u8 }];
        data.extend_from_slice(full.as_bytes());
        data.push(0);
        if !db.put(names.as_bytes().to_vec(), data) {
            warnings.push(format!("ignored duplicate: {names}"));
            continue;
        }
        count += 1;
        if !names.contains('|') {
            continue;
        }
        let mut shadow = vec![2u8];
        shadow.extend_from_slice(names.as_bytes());
        for n in names.split('|').filter(|n| !n.is_empty()) {
            if !db.put(n.as_bytes().to_vec(), shadow.clone()) {
                warnings.push(format!("ignored duplicate: {n}"));
            }
        }
    }
    Ok((db.pairs, warnings, count))
}
