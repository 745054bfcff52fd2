//! `certctl rehash` as FreeBSD 15's program (`usr.sbin/certctl/
//! certctl.c`) does it: the untrusted certificates of
//! `/usr/share/certs/untrusted`, `${LOCALBASE}/share/certs/untrusted`,
//! `/etc/ssl/untrusted` and the legacy `/etc/ssl/blacklisted`; the
//! trusted ones of `/usr/share/certs/trusted`,
//! `${LOCALBASE}/share/certs/trusted`, `${LOCALBASE}/share/certs` and
//! `/etc/ssl/certs` itself, less the untrusted; every certificate of
//! every file (all regular files, recursively), each once. Each set is
//! ordered as `X509_cmp` orders it (by SHA-1 fingerprint) and written as
//! PEM copies named `<hash>.<n>`, `n` the first free for that hash in
//! that order; anything else in the directory is removed; and the
//! trusted set is written whole to the bundle `/etc/ssl/cert.pem`
//! (unless `-B`).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::der::pem;
use super::store::{self, in_root_strictly, Cert};
use super::CertsError;

type Tree = BTreeMap<([u8; 20], Vec<u8>), Cert>;

/// The options of one run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub destdir: String,
    pub distbase: String,
    pub localbase: String,
    pub nobundle: bool,
    pub verbose: bool,
}

impl Options {
    fn path(&self, template: &str) -> String {
        match template.strip_prefix("%L") {
            Some(rest) => format!("{}{}{rest}", self.destdir, self.localbase),
            None => format!("{}{}{template}", self.destdir, self.distbase),
        }
    }
}

struct Run<'a> {
    root: &'a Path,
    err: &'a mut Vec<u8>,
    verbose: bool,
    count: usize,
}

impl Run<'_> {
    /// `read_certs`: -1 (None) when `dir` is no directory.
    fn read_certs(
        &mut self,
        dir: &str,
        tree: &mut Tree,
        exclude: Option<&Tree>,
    ) -> Result<Option<usize>, CertsError> {
        if !in_root_strictly(self.root, dir)?.is_dir() {
            return Ok(None);
        }
        let mut seen = 0;
        let mut added = 0;
        for f in store::files(self.root, dir, true, &mut seen)? {
            let certs = store::certs_in(self.root, &f)?;
            if certs.is_empty() {
                let _ = writeln!(self.err, "certctl: {f}: no valid certificates found");
            }
            for c in certs {
                let key = (c.sha1, c.cert.der.clone());
                if exclude.is_some_and(|x| x.contains_key(&key)) {
                    if self.verbose {
                        let _ = writeln!(self.err, "{:08x}: excluded", c.hash);
                    }
                    continue;
                }
                if tree.contains_key(&key) {
                    continue;
                }
                self.count += 1;
                if self.count > store::MAX_CERTS {
                    return Err(CertsError::TooMany(format!(
                        "more than {} certificates",
                        store::MAX_CERTS
                    )));
                }
                tree.insert(key, c);
                added += 1;
            }
        }
        Ok(Some(added))
    }
}

/// `certctl_rehash`.
pub fn rehash(root: &Path, o: &Options, err: &mut Vec<u8>) -> Result<(), CertsError> {
    let mut run = Run {
        root,
        err,
        verbose: o.verbose,
        count: 0,
    };
    let mut untrusted = Tree::new();
    for t in ["/usr/share/certs/untrusted", "%L/share/certs/untrusted"] {
        run.read_certs(&o.path(t), &mut untrusted, None)?;
    }
    let untrusted_dest = o.path("/etc/ssl/untrusted");
    run.read_certs(&untrusted_dest, &mut untrusted, None)?;
    let legacy = o.path("/etc/ssl/blacklisted");
    match run.read_certs(&legacy, &mut untrusted, None)? {
        Some(0) => {
            let _ = writeln!(
                run.err,
                "certctl: legacy directory {legacy} can safely be deleted"
            );
        }
        Some(_) => {
            let _ = writeln!(
                run.err,
                "certctl: certificates found in legacy directory {legacy}"
            );
        }
        None => {}
    }
    let mut trusted = Tree::new();
    for t in [
        "/usr/share/certs/trusted",
        "%L/share/certs/trusted",
        "%L/share/certs",
    ] {
        run.read_certs(&o.path(t), &mut trusted, Some(&untrusted))?;
    }
    let trusted_dest = o.path("/etc/ssl/certs");
    run.read_certs(&trusted_dest, &mut trusted, Some(&untrusted))?;

    write_certs(root, &untrusted_dest, &untrusted)?;
    write_certs(root, &trusted_dest, &trusted)?;
    if !o.nobundle {
        let bundle = o.path("/etc/ssl/cert.pem");
        let (dir, name) = bundle.rsplit_once('/').expect("absolute");
        let dir_host = in_root_strictly(root, dir)?;
        super::make_dir(&dir_host, dir)?;
        let bytes: Vec<u8> = trusted.values().flat_map(|c| pem(&c.cert.der)).collect();
        replace(&dir_host, name, &bytes, &bundle)?;
    }
    Ok(())
}

/// `write_certs`: the set as `<hash>.<n>` PEM files, nothing else left.
fn write_certs(root: &Path, dir: &str, tree: &Tree) -> Result<(), CertsError> {
    let host = in_root_strictly(root, dir)?;
    super::make_dir(&host, dir)?;
    let mut names: BTreeMap<String, &Cert> = BTreeMap::new();
    let mut taken: std::collections::BTreeSet<(u32, u32)> = Default::default();
    for c in tree.values() {
        let n = (0..)
            .find(|n| taken.insert((c.hash, *n)))
            .expect("a free number");
        names.insert(format!("{:08x}.{n}", c.hash), c);
    }
    let werr = |source| CertsError::Write {
        path: dir.into(),
        source,
    };
    for e in fs::read_dir(&host).map_err(werr)? {
        let e = e.map_err(werr)?;
        let keep = e
            .file_name()
            .to_str()
            .is_some_and(|n| names.contains_key(n));
        if !e.file_type().map_err(werr)?.is_dir() && !keep {
            fs::remove_file(e.path()).map_err(werr)?;
        }
    }
    for (name, c) in names {
        replace(&host, &name, &pem(&c.cert.der), &format!("{dir}/{name}"))?;
    }
    Ok(())
}

/// Writes `.name` then renames it over `name`, mode 0444.
fn replace(dir: &Path, name: &str, bytes: &[u8], shown: &str) -> Result<(), CertsError> {
    let werr = |source| CertsError::Write {
        path: shown.into(),
        source,
    };
    let tmp = dir.join(format!(".{name}"));
    let _ = fs::remove_file(&tmp);
    fs::write(&tmp, bytes).map_err(werr)?;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o444)).map_err(werr)?;
    fs::rename(&tmp, dir.join(name)).map_err(werr)
}
