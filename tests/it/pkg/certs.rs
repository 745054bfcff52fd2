//! `certctl rehash` (`jbuild::pkg::certs`): certificates made here by the
//! `openssl` program with subjects that test OpenSSL's canonical form
//! (mixed case, runs of spaces, leading and trailing spaces,
//! PrintableString and UTF8String, a non-ASCII name, a multi-valued RDN,
//! an empty subject, two certificates of one subject); each link's name
//! is `openssl x509 -hash` of what it points to; untrusted ones are in
//! `/etc/ssl/untrusted` and not in `/etc/ssl/certs`; a second rehash
//! leaves the same tree. For FreeBSD 14's script and 15's program.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;

use jbuild::pkg::certs;
use jbuild::pkg::script::Io;

/// A self-signed certificate for `subj` (openssl's `-subj` syntax, read
/// as UTF-8), PEM: its strings PrintableString where they can be (then
/// T61String or BMPString) with `printable`, else all UTF8String.
fn make(dir: &Path, n: usize, subj: &str, printable: bool) -> Vec<u8> {
    let mask = if printable { "default" } else { "utf8only" };
    let conf = dir.join(format!("req{n}.cnf"));
    fs::write(
        &conf,
        format!("[req]\ndistinguished_name = dn\nstring_mask = {mask}\n[dn]\n"),
    )
    .unwrap();
    let key = dir.join(format!("k{n}.pem"));
    let out = dir.join(format!("c{n}.pem"));
    let st = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
        ])
        .args([
            "-keyout".as_ref(),
            key.as_os_str(),
            "-out".as_ref(),
            out.as_os_str(),
        ])
        .args(["-config".as_ref(), conf.as_os_str()])
        .args(["-subj", subj, "-multivalue-rdn", "-utf8"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "openssl req {subj}: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    fs::read(out).unwrap()
}

fn openssl_hash(file: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-hash", "-noout", "-in"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn fingerprint(file: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-fingerprint", "-sha1", "-noout", "-in"])
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// The subjects: each is a case OpenSSL's canonical form treats.
/// (`true`: PrintableString, or BMPString for the non-ASCII one.)
const SUBJECTS: [(&str, bool); 8] = [
    ("/CN=Mixed Case CA/O=Example Org", true),
    ("/CN=  Spaced    Out   Name  /O=Tabs Too", false),
    (
        "/C=FR/O=\u{c9}cole Polytechnique/CN=\u{c9}COLE Racine",
        false,
    ),
    ("/O=Multi/CN=Multi Valued+OU=Second Part", false),
    ("/", true),
    ("/CN=\u{dc}n\u{ef}code   In BMP", true),
    ("/CN=Same Subject", false),
    ("/CN=Same Subject", false),
];

/// Certificates in the image's trust sources: one a file, two in one
/// bundle, and an untrusted one also present as trusted.
fn image(root: &Path, work: &Path) -> Vec<Vec<u8>> {
    let pems: Vec<Vec<u8>> = SUBJECTS
        .iter()
        .enumerate()
        .map(|(i, (s, u))| make(work, i, s, *u))
        .collect();
    let trusted = root.join("usr/share/certs/trusted");
    fs::create_dir_all(&trusted).unwrap();
    for (i, p) in pems.iter().enumerate().take(7) {
        fs::write(trusted.join(format!("cert{i}.pem")), p).unwrap();
    }
    // Untrusted: the "Mixed Case" one, and the second "Same Subject".
    let untrusted = root.join("usr/share/certs/untrusted");
    fs::create_dir_all(&untrusted).unwrap();
    fs::write(untrusted.join("bad.pem"), &pems[0]).unwrap();
    fs::create_dir_all(root.join("usr/local/share/certs")).unwrap();
    fs::write(root.join("usr/local/share/certs/second.crt"), &pems[7]).unwrap();
    pems
}

/// Every entry of a directory: name → (link target or file content).
fn tree(dir: &Path) -> BTreeMap<String, (Option<String>, Vec<u8>)> {
    fs::read_dir(dir)
        .map(|d| {
            d.map(|e| {
                let e = e.unwrap();
                let link = fs::read_link(e.path())
                    .ok()
                    .map(|p| p.display().to_string());
                (
                    e.file_name().into_string().unwrap(),
                    (link, fs::read(e.path()).unwrap_or_default()),
                )
            })
            .collect()
        })
        .unwrap_or_default()
}

fn check_names(dir: &Path) {
    for (name, _) in tree(dir) {
        let (hash, n) = name.split_once('.').unwrap();
        assert!(n.parse::<u32>().is_ok(), "{name}");
        assert_eq!(
            hash,
            openssl_hash(&dir.join(&name)),
            "{}/{name}",
            dir.display()
        );
    }
}

fn rehash(root: &Path) -> (i32, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = Io {
        stdin: b"",
        stdout: &mut out,
        stderr: &mut err,
    };
    let st = certs::certctl(root, &["rehash".to_string()], &mut io).unwrap();
    (st, String::from_utf8_lossy(&err).into_owned())
}

/// The trusted links: the six trusted files and the second "Same
/// Subject" in `/usr/local/share/certs`, not the untrusted "Mixed Case".
fn check_store(root: &Path) {
    let certs_dir = root.join("etc/ssl/certs");
    let untrusted_dir = root.join("etc/ssl/untrusted");
    check_names(&certs_dir);
    check_names(&untrusted_dir);
    let links = tree(&certs_dir);
    assert_eq!(links.len(), 7, "{links:?}");
    let fps: Vec<String> = links
        .keys()
        .map(|n| fingerprint(&certs_dir.join(n)))
        .collect();
    let bad = fingerprint(&root.join("usr/share/certs/untrusted/bad.pem"));
    assert!(
        !fps.contains(&bad),
        "the untrusted certificate is not trusted"
    );
    let untrusted = tree(&untrusted_dir);
    assert_eq!(untrusted.len(), 1, "{untrusted:?}");
    assert_eq!(
        fingerprint(&untrusted_dir.join(untrusted.keys().next().unwrap())),
        bad
    );
    let same = openssl_hash(&root.join("usr/share/certs/trusted/cert6.pem"));
    assert!(
        links.contains_key(&format!("{same}.0")) && links.contains_key(&format!("{same}.1")),
        "{links:?}"
    );
    assert_eq!(
        openssl_hash(&root.join("usr/share/certs/trusted/cert4.pem")),
        "eea339da",
        "the empty subject"
    );
}

#[test]
fn the_14_script_links_each_trusted_certificate_by_its_subject_hash() {
    let (t, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = t.path();
    image(root, work.path());
    // No /usr/sbin/certctl, no freebsd-version: 14's script, relative
    // symlinks to the files (`install -lrs`).
    let (st, _) = rehash(root);
    assert_eq!(st, 0);
    check_store(root);
    let links = tree(&root.join("etc/ssl/certs"));
    let targets: Vec<&str> = links.values().filter_map(|(l, _)| l.as_deref()).collect();
    assert_eq!(targets.len(), 7, "all symlinks");
    assert!(
        targets.contains(&"../../../usr/share/certs/trusted/cert1.pem"),
        "{targets:?}"
    );
    assert!(
        targets.contains(&"../../../usr/local/share/certs/second.crt"),
        "{targets:?}"
    );
    rehash(root);
    assert_eq!(
        tree(&root.join("etc/ssl/certs")),
        links,
        "a second rehash leaves the same tree"
    );
}

#[test]
fn the_15_program_writes_pem_copies_and_the_bundle() {
    let (t, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = t.path();
    image(root, work.path());
    fs::create_dir_all(root.join("usr/sbin")).unwrap();
    fs::write(root.join("usr/sbin/certctl"), b"\x7fELF\x02\x01\x01\x09").unwrap();
    let (st, err) = rehash(root);
    assert_eq!(st, 0, "{err}");
    check_store(root);
    let files = tree(&root.join("etc/ssl/certs"));
    assert!(files
        .values()
        .all(|(l, c)| l.is_none() && c.starts_with(b"-----BEGIN CERTIFICATE-----\n")));
    let bundle = fs::read_to_string(root.join("etc/ssl/cert.pem")).unwrap();
    assert_eq!(bundle.matches("-----BEGIN CERTIFICATE-----").count(), 7);
    rehash(root);
    assert_eq!(
        tree(&root.join("etc/ssl/certs")),
        files,
        "a second rehash leaves the same tree"
    );
    assert_eq!(
        fs::read_to_string(root.join("etc/ssl/cert.pem")).unwrap(),
        bundle
    );
}

/// `openssl x509 -text` of PEMs: the form FreeBSD's trust store files
/// have, a `Certificate:` line before each certificate.
fn text_form(pems: &[&[u8]], work: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, p) in pems.iter().enumerate() {
        let f = work.join(format!("t{i}.pem"));
        fs::write(&f, p).unwrap();
        let o = Command::new("openssl")
            .args(["x509", "-text", "-in"])
            .arg(&f)
            .output()
            .unwrap();
        out.extend(o.stdout);
    }
    out
}

#[test]
fn the_later_14_script_splits_bundles_and_hard_links_single_files() {
    use std::os::unix::fs::MetadataExt;
    let (t, work) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = t.path();
    let pems: Vec<Vec<u8>> = (0..3)
        .map(|i| make(work.path(), i, &format!("/CN=Bundle {i}"), false))
        .collect();
    let trusted = root.join("usr/share/certs/trusted");
    fs::create_dir_all(&trusted).unwrap();
    fs::write(trusted.join("one.pem"), text_form(&[&pems[0]], work.path())).unwrap();
    fs::write(
        trusted.join("two.crt"),
        text_form(&[&pems[1], &pems[2]], work.path()),
    )
    .unwrap();
    fs::write(trusted.join("plain.pem"), &pems[0]).unwrap();
    // A stand-in for the script's later form: what jbuild reads it for.
    fs::create_dir_all(root.join("usr/sbin")).unwrap();
    fs::write(
        root.join("usr/sbin/certctl"),
        "#!/bin/sh\n# stand-in: find -L, case $(grep -c '^Certificate:$' \"$CFILE\"), link=${2:+-lm}\n",
    )
    .unwrap();
    let (st, err) = rehash(root);
    assert_eq!(st, 0, "{err}");
    let dir = root.join("etc/ssl/certs");
    check_names(&dir);
    let entries = tree(&dir);
    assert_eq!(
        entries.len(),
        3,
        "one.pem linked, two.crt split in two, plain.pem (no text) skipped: {entries:?}"
    );
    let one = format!("{}.0", openssl_hash(&trusted.join("one.pem")));
    assert_eq!(
        fs::metadata(dir.join(&one)).unwrap().ino(),
        fs::metadata(trusted.join("one.pem")).unwrap().ino(),
        "a hard link (install -lm on one filesystem)"
    );
}

#[test]
fn a_store_leading_out_of_the_root_is_refused_and_other_verbs_named() {
    use jbuild::pkg::script::CommandError;
    let (t, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = t.path();
    fs::create_dir_all(root.join("etc")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("etc/ssl")).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = Io {
        stdin: b"",
        stdout: &mut out,
        stderr: &mut err,
    };
    let e = certs::certctl(root, &["rehash".to_string()], &mut io).unwrap_err();
    assert!(matches!(e, CommandError::Hostile { .. }), "{e:?}");
    assert_eq!(
        fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
    match certs::certctl(root, &["list".to_string()], &mut io).unwrap_err() {
        CommandError::Unknown { command } => assert_eq!(command, "certctl list"),
        other => panic!("{other:?}"),
    }
}
