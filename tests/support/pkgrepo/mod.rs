//! FreeBSD package repositories written by the tests themselves, from
//! pkg-repository(5) and pkg's sources (`../shared/notes/pkg-anyhost.md`),
//! sharing no code with `src/pkg`: what jbuild reads must come from a
//! writer that did not learn the format from jbuild.
//!
//! A repository directory holds `meta.conf`, one catalogue archive (tar,
//! compressed by the `zstd` or `xz` program) and `All/<name>-<version>.pkg`
//! files. Signatures are made by the `openssl` program over the SHA-256 hex
//! of the catalogue member, as `pkg repo` does (`openssl dgst -sha256
//! -sign`; Ed25519 by `openssl pkeyutl -sign -rawin`, see [`eddsa`]);
//! BLAKE2b sums by the `b2sum` program.

pub mod eddsa;
pub mod elf;
pub mod entries;
pub mod full;
pub mod image;
pub mod pkgfile;
pub mod platform;
pub mod scripts;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::tar::ustar;

/// One package of a test repository.
#[derive(Clone, Debug)]
pub struct TestPkg {
    pub name: String,
    pub version: String,
    pub origin: String,
    /// Dependencies by name.
    pub deps: Vec<String>,
    pub conflicts: Vec<String>,
    /// What the package file holds (else one file,
    /// `/usr/local/share/<name>/file`).
    pub contents: Option<pkgfile::Contents>,
    /// More keys of the compact manifest (`options`, `shlibs_required`,
    /// …): in the catalogue and in both of the package's manifests.
    pub compact_extra: Vec<(String, Value)>,
}

/// `name-version` with origin `test/<name>`, depending on `deps`.
pub fn pkg(name: &str, version: &str, deps: &[&str]) -> TestPkg {
    TestPkg {
        name: name.into(),
        version: version.into(),
        origin: format!("test/{name}"),
        deps: deps.iter().map(|d| d.to_string()).collect(),
        conflicts: Vec::new(),
        contents: None,
        compact_extra: Vec::new(),
    }
}

/// Which catalogue a repository serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// pkg 2.x: `data.pkg` (zstd) holding `data`.
    DataPkg,
    /// `packagesite.pkg` (zstd).
    PackagesitePkg,
    /// `packagesite.tzst`, meta.conf `packing_format = "tzst"`.
    PackagesiteTzst,
    /// `packagesite.txz` (xz), meta.conf `packing_format = "txz"`.
    PackagesiteTxz,
}

/// How the catalogue is signed.
#[derive(Clone, Debug)]
pub enum Signing {
    None,
    /// A `signature` member by this key.
    Pubkey(Key),
    /// `<name>.sig` and `<name>.pub` members, one pair per key.
    Fingerprints(Vec<(String, Key)>),
}

/// A key pair made by the `openssl` program, in files: RSA (`openssl
/// genrsa`, public key in PEM), ECDSA on a named curve (`openssl
/// ecparam -genkey`, public key in DER as pkg's ECC signer writes it), or
/// Ed25519 (`openssl genpkey`, public key in pkg's own container).
#[derive(Clone, Debug)]
pub struct Key {
    pub private: PathBuf,
    pub public: PathBuf,
    /// The curve of an ECDSA key, [`ED25519`] for pkg's `eddsa`; `None`
    /// for RSA.
    pub curve: Option<String>,
}

/// The `curve` of an Ed25519 key.
pub const ED25519: &str = "ed25519";

impl Key {
    /// An Ed25519 key, its public half in pkg's container
    /// ([`eddsa::write_public`]), as `pkg key -t eddsa` would have it.
    pub fn eddsa(dir: &Path, name: &str) -> Key {
        let private = dir.join(format!("{name}.key"));
        let public = dir.join(format!("{name}.pub"));
        run(Command::new("openssl")
            .args(["genpkey", "-algorithm", "ed25519", "-out"])
            .arg(&private));
        eddsa::write_public(&private, &public);
        Key {
            private,
            public,
            curve: Some(ED25519.into()),
        }
    }

    fn is_eddsa(&self) -> bool {
        self.curve.as_deref() == Some(ED25519)
    }

    /// What pkg's head says of this key's signatures (`None`: RSA's bare
    /// form).
    pub fn pkgsign_type(&self) -> Option<&'static str> {
        match &self.curve {
            None => None,
            Some(_) if self.is_eddsa() => Some("eddsa"),
            Some(_) => Some("ecdsa"),
        }
    }

    /// Ed25519 over `message` (`openssl pkeyutl -sign -rawin`), in pkg's
    /// DER form.
    fn sign_eddsa(&self, message: &[u8]) -> Vec<u8> {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        fs::write(tmp.path(), message).unwrap();
        let raw = run_out(
            Command::new("openssl")
                .args(["pkeyutl", "-sign", "-rawin", "-inkey"])
                .arg(&self.private)
                .arg("-in")
                .arg(tmp.path()),
        );
        assert_eq!(raw.len(), 64, "an Ed25519 signature");
        eddsa::der_signature(&raw)
    }

    /// An ECDSA key on `curve` (`secp256k1`, `secp384r1`, …).
    pub fn ecdsa(dir: &Path, name: &str, curve: &str) -> Key {
        let private = dir.join(format!("{name}.key"));
        let public = dir.join(format!("{name}.pub"));
        run(Command::new("openssl")
            .args(["ecparam", "-name", curve, "-genkey", "-noout", "-out"])
            .arg(&private));
        run(Command::new("openssl")
            .args(["ec", "-pubout", "-outform", "DER", "-in"])
            .arg(&private)
            .arg("-out")
            .arg(&public));
        Key {
            private,
            public,
            curve: Some(curve.into()),
        }
    }

    pub fn new(dir: &Path, name: &str) -> Key {
        let private = dir.join(format!("{name}.key"));
        let public = dir.join(format!("{name}.pub"));
        run(Command::new("openssl")
            .args(["genrsa", "-out"])
            .arg(&private)
            .arg("2048"));
        run(Command::new("openssl")
            .args(["rsa", "-pubout", "-in"])
            .arg(&private)
            .arg("-out")
            .arg(&public));
        Key {
            private,
            public,
            curve: None,
        }
    }

    /// What pkg's signer would write for a catalogue member `data` in
    /// `pubkey` mode (`fingerprints` false) or `fingerprints` mode: RSA
    /// signs the member's SHA-256 hex either way; ECDSA signs that hex
    /// for fingerprints, and the member's raw BLAKE2b-512 (`b2sum`) for a
    /// pubkey. Both with SHA-256, DER out (`openssl dgst -sha256 -sign`).
    /// EdDSA signs the same messages as ECDSA, with Ed25519.
    pub fn sign_member(&self, data: &[u8], fingerprints: bool) -> Vec<u8> {
        let hex_sum = hex(&Sha256::digest(data));
        if self.curve.is_none() || fingerprints {
            return self.sign(&hex_sum);
        }
        let tmp = tempfile::NamedTempFile::new().unwrap();
        fs::write(tmp.path(), data).unwrap();
        let raw = b2sum(tmp.path());
        if self.is_eddsa() {
            return self.sign_eddsa(&raw);
        }
        let args = [
            "dgst".to_string(),
            "-sha256".into(),
            "-sign".into(),
            self.private.display().to_string(),
        ];
        openssl(&args, &raw)
    }

    /// The signature pkg expects: PKCS#1 v1.5 with SHA-256 over `hex`
    /// (ECDSA with SHA-256 for an ECDSA key).
    pub fn sign(&self, hex: &str) -> Vec<u8> {
        if self.is_eddsa() {
            return self.sign_eddsa(hex.as_bytes());
        }
        let mut args = vec![
            "dgst".into(),
            "-sha256".into(),
            "-binary".into(),
            "-sign".into(),
        ];
        args.push(self.private.display().to_string());
        openssl(&args, hex.as_bytes())
    }

    /// The form pkg built on OpenSSL before 3 wrote: PKCS#1 v1.5 over a
    /// DigestInfo naming SHA-1 whose octet string is the 64 hex bytes,
    /// made with `openssl rsautl -sign` over that DER written by hand.
    pub fn sign_legacy(&self, hex: &str) -> Vec<u8> {
        let mut der = vec![
            0x30, 0x51, 0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00, 0x04,
            0x40,
        ];
        der.extend_from_slice(hex.as_bytes());
        let mut args = vec![
            "rsautl".into(),
            "-sign".into(),
            "-pkcs".into(),
            "-inkey".into(),
        ];
        args.push(self.private.display().to_string());
        openssl(&args, &der)
    }

    /// The fingerprint pkg trusts: SHA-256 of the `.pub` file's bytes.
    pub fn fingerprint(&self) -> String {
        hex(&Sha256::digest(fs::read(&self.public).unwrap()))
    }

    /// Writes a pkg fingerprint file for this key into `dir`.
    pub fn trust_in(&self, dir: &Path, file: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(
            dir.join(file),
            format!(
                "function: \"sha256\"\nfingerprint: \"{}\"\n",
                self.fingerprint()
            ),
        )
        .unwrap();
    }
}

/// What `openssl ARGS` prints for `input` (its stderr kept from the
/// test's output: rsautl warns that it is deprecated).
fn openssl(args: &[String], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new("openssl")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl runs");
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// What a program prints, which must succeed.
fn run_out(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("the program runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("the program runs");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The checksum form a repository writes for its packages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SumStyle {
    /// pkg up to 2.7: 64 hex digits.
    Sha256Hex,
    /// pkg 2.8: `2$` and BLAKE2b-512 in pkg's base32.
    Blake2b,
}

/// pkg's base32, as `pkg_checksum_encode_base32` walks the bytes: five at
/// a time, carrying what is left of each to the next.
pub fn pkg_base32(input: &[u8]) -> String {
    const B32: &[u8] = b"ybndrfg8ejkmcpqxot1uwisza345h769";
    let mut out = String::new();
    let mut remain: i32 = -1;
    for (i, &b) in input.iter().enumerate() {
        let b = b as i32;
        match i % 5 {
            0 => {
                out.push(B32[(b & 0x1f) as usize] as char);
                remain = b >> 5;
            }
            1 => {
                let x = remain | b << 3;
                out.push(B32[(x & 0x1f) as usize] as char);
                out.push(B32[(x >> 5 & 0x1f) as usize] as char);
                remain = x >> 10;
            }
            2 => {
                let x = remain | b << 1;
                out.push(B32[(x & 0x1f) as usize] as char);
                remain = x >> 5;
            }
            3 => {
                let x = remain | b << 4;
                out.push(B32[(x & 0x1f) as usize] as char);
                out.push(B32[(x >> 5 & 0x1f) as usize] as char);
                remain = x >> 10 & 0x3;
            }
            _ => {
                let x = remain | b << 2;
                out.push(B32[(x & 0x1f) as usize] as char);
                out.push(B32[(x >> 5 & 0x1f) as usize] as char);
                remain = -1;
            }
        }
    }
    if remain >= 0 {
        out.push(B32[remain as usize] as char);
    }
    out
}

/// The BLAKE2b-512 of a file, raw, as the `b2sum` program computes it.
fn b2sum(path: &Path) -> Vec<u8> {
    let out = Command::new("b2sum")
        .arg(path)
        .output()
        .expect("b2sum runs");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let h = text.split_whitespace().next().unwrap();
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

/// The `sum` of a file in `style`.
pub fn sum_of(path: &Path, style: SumStyle) -> String {
    match style {
        SumStyle::Sha256Hex => hex(&Sha256::digest(fs::read(path).unwrap())),
        SumStyle::Blake2b => format!("2${}", pkg_base32(&b2sum(path))),
    }
}

/// A repository to write.
pub struct RepoSpec {
    pub layout: Layout,
    pub signing: Signing,
    pub sums: SumStyle,
    pub packages: Vec<TestPkg>,
    /// Sign the catalogue, then change one byte of it: a tampered mirror.
    pub tamper: bool,
    /// `$PKGSIGN:<type>$` written before each signature.
    pub sig_type: Option<String>,
    /// Extra `<n>.sig` members (for the entry limit).
    pub extra_sigs: usize,
    /// Signatures in the pre-OpenSSL-3 form ([`Key::sign_legacy`]).
    pub legacy: bool,
    /// `$PKGSIGN:<type>$` also before each `.pub`, as pkg's signing
    /// command writes it.
    pub pub_head: bool,
    /// An ECDSA `signature` member made over the SHA-256 hex (what the
    /// fingerprints mode signs) instead of the BLAKE2b-512: a mistake.
    pub ecdsa_over_hex: bool,
    /// The ABI every package says it is for (`FreeBSD:14:amd64`).
    pub abi: String,
    /// Every package's `FreeBSD_version` annotation (`1403000`).
    pub freebsd_version: String,
    /// `meta.txz` (the meta in a signed tar, pkg's older form) instead
    /// of `meta.conf`.
    pub meta_txz: bool,
    /// Change a byte of `meta.txz`'s `meta` after signing it.
    pub tamper_meta: bool,
}

impl RepoSpec {
    pub fn new(layout: Layout, packages: Vec<TestPkg>) -> RepoSpec {
        RepoSpec {
            layout,
            signing: Signing::None,
            sums: SumStyle::Sha256Hex,
            packages,
            tamper: false,
            sig_type: None,
            extra_sigs: 0,
            legacy: false,
            pub_head: false,
            ecdsa_over_hex: false,
            abi: "FreeBSD:14:amd64".into(),
            freebsd_version: "1403000".into(),
            meta_txz: false,
            tamper_meta: false,
        }
    }

    /// Writes the repository into `dir` (made if missing).
    pub fn write(&self, dir: &Path) {
        fs::create_dir_all(dir.join("All")).unwrap();
        let mut manifests = Vec::new();
        for p in &self.packages {
            let deps: BTreeMap<_, _> = p
                .deps
                .iter()
                .map(|d| {
                    let v = self
                        .packages
                        .iter()
                        .find(|q| &q.name == d)
                        .map_or("0".to_string(), |q| q.version.clone());
                    (
                        d.clone(),
                        json!({"origin": format!("test/{d}"), "version": v}),
                    )
                })
                .collect();
            let mut compact = json!({
                "name": p.name, "origin": p.origin, "version": p.version,
                "comment": format!("{} for tests", p.name), "maintainer": "tests@example.invalid",
                "www": "https://example.invalid", "abi": self.abi,
                "arch": old_arch(&self.abi), "prefix": "/usr/local", "flatsize": 3,
                "licenselogic": "single", "licenses": ["BSD2CLAUSE"], "desc": "a test package",
                "deps": deps, "categories": ["test"], "conflicts": p.conflicts,
                "annotations": {"FreeBSD_version": self.freebsd_version},
            });
            for (k, v) in &p.compact_extra {
                compact[k.as_str()] = v.clone();
            }
            let file = format!("All/{}-{}.pkg", p.name, p.version);
            let contents = p.contents.clone().unwrap_or_else(|| pkgfile::Contents {
                items: vec![pkgfile::file(
                    &format!("/usr/local/share/{}/file", p.name),
                    0o644,
                    b"hi\n",
                )],
                sums: self.sums,
                ..pkgfile::Contents::default()
            });
            fs::write(dir.join(&file), contents.package(&compact)).unwrap();
            let mut m = compact;
            let size = fs::metadata(dir.join(&file)).unwrap().len();
            m["sum"] = Value::String(sum_of(&dir.join(&file), self.sums));
            m["pkgsize"] = json!(size);
            m["path"] = Value::String(file.clone());
            m["repopath"] = Value::String(file);
            manifests.push(m);
        }
        let (member, text) = match self.layout {
            Layout::DataPkg => (
                "data",
                serde_json::to_string(&json!({
                    "groups": [], "expired_packages": [], "packages": manifests,
                }))
                .unwrap(),
            ),
            _ => (
                "packagesite.yaml",
                manifests
                    .iter()
                    .map(|m| m.to_string() + "\n")
                    .collect::<String>(),
            ),
        };
        let (archive, format, program) = match self.layout {
            Layout::DataPkg => ("data.pkg", "tzst", "zstd"),
            Layout::PackagesitePkg => ("packagesite.pkg", "tzst", "zstd"),
            Layout::PackagesiteTzst => ("packagesite.tzst", "tzst", "zstd"),
            Layout::PackagesiteTxz => ("packagesite.txz", "txz", "xz"),
        };
        let meta = format!(
            "version = 2;\npacking_format = \"{format}\";\nmanifests = \"packagesite.yaml\";\n\
             data = \"data\";\nfilesite = \"files\";\nmanifests_archive = \"packagesite\";\n\
             filesite_archive = \"files\";\ndata_archive = \"data\";\n"
        );
        if self.meta_txz {
            // pkg's older form: `meta` in a tar compressed by xz, signed
            // as a catalogue is.
            let mut members = self.signed_members(meta.as_bytes());
            let mut bytes = meta.into_bytes();
            if self.tamper_meta {
                // `filesite = "files"` becomes "giles": harmless, but
                // not what was signed.
                let at = bytes.windows(7).position(|w| w == b"\"files\"").unwrap() + 1;
                bytes[at] = b'g';
            }
            members.push(("meta".into(), bytes));
            let files: Vec<(&str, u32, &[u8])> = members
                .iter()
                .map(|(n, b)| (n.as_str(), 0o644, b.as_slice()))
                .collect();
            fs::write(dir.join("meta.txz"), compress(&ustar(&files), "xz")).unwrap();
        } else {
            fs::write(dir.join("meta.conf"), meta).unwrap();
        }
        let mut members = self.signed_members(text.as_bytes());
        for i in 0..self.extra_sigs {
            members.push((format!("extra{i}.sig"), vec![0; 256]));
        }
        let mut text = text.into_bytes();
        if self.tamper {
            // One package's version changes after signing.
            let at = text
                .windows(11)
                .position(|w| w == b"\"version\":\"")
                .unwrap()
                + 11;
            text[at] = if text[at] == b'9' { b'8' } else { b'9' };
        }
        members.push((member.into(), text));
        let files: Vec<(&str, u32, &[u8])> = members
            .iter()
            .map(|(n, b)| (n.as_str(), 0o644, b.as_slice()))
            .collect();
        fs::write(dir.join(archive), compress(&ustar(&files), program)).unwrap();
    }
}

impl RepoSpec {
    /// The signature members of an archive holding `text`, as the spec
    /// signs: `signature`, or `<name>.sig`/`.pub` pairs.
    fn signed_members(&self, text: &[u8]) -> Vec<(String, Vec<u8>)> {
        let digest = hex(&Sha256::digest(text));
        // pkg heads every signature but RSA's with its type.
        let head = |k: &Key, bytes: Vec<u8>| {
            let kind = match &self.sig_type {
                Some(t) => Some(t.clone()),
                None => k.pkgsign_type().map(str::to_string),
            };
            match kind {
                Some(t) => [format!("$PKGSIGN:{t}$").into_bytes(), bytes].concat(),
                None => bytes,
            }
        };
        let sign = |k: &Key, fingerprints: bool| {
            if self.legacy {
                k.sign_legacy(&digest)
            } else {
                k.sign_member(text, fingerprints)
            }
        };
        let mut members: Vec<(String, Vec<u8>)> = Vec::new();
        match &self.signing {
            Signing::None => {}
            Signing::Pubkey(k) => {
                let sig = sign(k, self.ecdsa_over_hex);
                members.push(("signature".into(), head(k, sig)))
            }
            Signing::Fingerprints(keys) => {
                for (name, k) in keys {
                    members.push((format!("{name}.sig"), head(k, sign(k, true))));
                    let public = fs::read(&k.public).unwrap();
                    let public = if self.pub_head {
                        head(k, public)
                    } else {
                        public
                    };
                    members.push((format!("{name}.pub"), public));
                }
            }
        }
        members
    }
}

/// pkg's older form of an ABI (`freebsd:14:x86:64`), which it still
/// writes as `arch` beside `abi`.
pub fn old_arch(abi: &str) -> String {
    let mut parts = abi.splitn(3, ':');
    let (os, major, arch) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let arch = match arch {
        "amd64" => "x86:64",
        "aarch64" => "aarch64:64",
        "i386" => "x86:32",
        other => other,
    };
    format!("{}:{major}:{arch}", os.to_lowercase())
}

/// `data` compressed by the `zstd` or `xz` program.
pub fn compress(data: &[u8], program: &str) -> Vec<u8> {
    let mut child = Command::new(program)
        .arg("-c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the compressor runs");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&data).unwrap());
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// A repository configuration file for the repository at `dir`.
pub fn conf(name: &str, dir: &Path, extra: &str) -> String {
    format!(
        "{name}: {{\n  url: \"file://{}\",\n  {extra}\n}}\n",
        dir.display()
    )
}
