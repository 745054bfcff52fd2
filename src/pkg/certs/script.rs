//! `certctl rehash` as FreeBSD 14's shell script (`usr.sbin/certctl/
//! certctl.sh`) does it. The script changed within 14.x, so jbuild reads
//! the image's own script for what it does: the source and destination
//! directories from its `: ${TRUSTPATH:=…}` lines (`blacklisted` in
//! 14.0, `untrusted` later), how it links (`install -lrs`: a relative
//! symlink to the source's real path; `-lm`: a hard link), and how it
//! scans (`ls -1 | grep FILEPAT` in each directory, one link a file to
//! its first certificate; or `find -L` with the `Certificate:` count: a
//! file with none skipped, one linked, several split at those lines
//! into copies).

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::store::{self, in_root, in_root_strictly, Cert};
use super::{CertsError, LOCALBASE};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Links {
    Relative,
    Hard,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Scan {
    /// `ls -1 DIR | grep -Ee FILEPAT`: these suffixes.
    Listing(Vec<String>),
    /// `find -L DIRS -type f -name '*.pem' …` and the `Certificate:` count.
    Find,
}

/// One version of the script, read from its text.
#[derive(Debug, Clone)]
pub struct Script {
    trustpath: String,
    untrustpath: String,
    certdest: String,
    untrustdest: String,
    links: Links,
    scan: Scan,
    /// rehash clears regular files too, not only symlinks.
    clear_files: bool,
    /// a certificate already in the store is not linked twice.
    skip_duplicates: bool,
}

impl Script {
    /// What the script `text` does; the latest 14.x script's defaults for
    /// what it does not say.
    pub fn read(text: &str) -> Script {
        let default = |names: &[&str], fallback: &str| {
            names
                .iter()
                .find_map(|n| {
                    let head = format!(": ${{{n}:=");
                    text.lines()
                        .find_map(|l| l.trim().strip_prefix(&head)?.strip_suffix('}'))
                        .map(str::to_string)
                })
                .unwrap_or_else(|| fallback.to_string())
        };
        let scan = if text.contains("'^Certificate:$'") {
            Scan::Find
        } else {
            let pat = default(&["FILEPAT"], "\"\\.pem$|\\.crt$|\\.cer$|\\.crl$\"");
            Scan::Listing(
                pat.trim_matches('"')
                    .split('|')
                    .map(|p| p.trim_start_matches('\\').trim_end_matches('$').to_string())
                    .collect(),
            )
        };
        Script {
            trustpath: default(&["TRUSTPATH"], "${DESTDIR}${DISTBASE}/usr/share/certs/trusted:${DESTDIR}${LOCALBASE}/share/certs:${DESTDIR}${LOCALBASE}/etc/ssl/certs"),
            untrustpath: default(&["UNTRUSTPATH", "BLACKLISTPATH"], "${DESTDIR}${DISTBASE}/usr/share/certs/untrusted:${DESTDIR}${LOCALBASE}/etc/ssl/untrusted:${DESTDIR}${LOCALBASE}/etc/ssl/blacklisted"),
            certdest: default(&["CERTDESTDIR"], "${DESTDIR}${DISTBASE}/etc/ssl/certs"),
            untrustdest: default(&["UNTRUSTDESTDIR", "BLACKLISTDESTDIR"], "${DESTDIR}${DISTBASE}/etc/ssl/untrusted"),
            links: if !text.contains("-lrs") && text.contains("-lm") { Links::Hard } else { Links::Relative },
            scan,
            clear_files: text.contains("-type f -or -type l"),
            skip_duplicates: text.contains("Skipping duplicate entry"),
        }
    }

    fn expand(v: &str, destdir: &str, distbase: &str) -> String {
        v.replace("${DESTDIR}", destdir)
            .replace("${DISTBASE}", distbase)
            .replace("${LOCALBASE}", LOCALBASE)
    }

    /// `cmd_rehash`. Returns the number of errors the script counts.
    pub fn rehash(
        &self,
        root: &Path,
        destdir: &str,
        distbase: &str,
        out: &mut Vec<u8>,
        err: &mut Vec<u8>,
    ) -> Result<usize, CertsError> {
        let certdest = Self::expand(&self.certdest, destdir, distbase);
        let untrustdest = Self::expand(&self.untrustdest, destdir, distbase);
        for d in [&certdest, &untrustdest] {
            let host = in_root_strictly(root, d)?;
            if fs::symlink_metadata(&host).is_ok() {
                clear(&host, self.clear_files, 0).map_err(|source| CertsError::Write {
                    path: d.into(),
                    source,
                })?;
            } else {
                super::make_dir(&host, d)?;
            }
        }
        let mut run = Run {
            root,
            script: self,
            certdest,
            untrustdest,
            out,
            err,
            errors: 0,
        };
        let untrust = Self::expand(&self.untrustpath, destdir, distbase);
        run.scan(&untrust, false)?;
        let trust = Self::expand(&self.trustpath, destdir, distbase);
        run.scan(&trust, true)?;
        if run.errors > 0 {
            let _ = writeln!(run.err, "certctl: Encountered {} errors", run.errors);
        }
        Ok(run.errors)
    }
}

/// `find DIR (-type f -or -type l) -delete`, or only the links.
fn clear(dir: &Path, files: bool, depth: usize) -> std::io::Result<()> {
    if depth > store::MAX_DEPTH {
        return Ok(());
    }
    for e in fs::read_dir(dir)? {
        let e = e?;
        let kind = e.file_type()?;
        if kind.is_dir() {
            clear(&e.path(), files, depth + 1)?;
        } else if kind.is_symlink() || (files && kind.is_file()) {
            fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

/// What one scan gives `create_*`: a file (linked), or a piece of a
/// split file (copied).
enum Item {
    File(String),
    Piece(String, Vec<u8>),
}

struct Run<'a> {
    root: &'a Path,
    script: &'a Script,
    certdest: String,
    untrustdest: String,
    out: &'a mut Vec<u8>,
    err: &'a mut Vec<u8>,
    errors: usize,
}

impl Run<'_> {
    /// `do_scan` over the colon-separated `paths`.
    fn scan(&mut self, paths: &str, trusted: bool) -> Result<(), CertsError> {
        let mut seen = 0;
        let mut items = Vec::new();
        match &self.script.scan {
            Scan::Listing(suffixes) => {
                for dir in paths.split(':') {
                    if !in_root_strictly(self.root, dir)?.is_dir() {
                        continue;
                    }
                    let _ = writeln!(self.out, "Scanning {dir} for certificates...");
                    for f in store::files(self.root, dir, false, &mut seen)? {
                        if suffixes.iter().any(|s| f.ends_with(s.as_str())) {
                            items.push(Item::File(f));
                        }
                    }
                }
            }
            Scan::Find => {
                for dir in paths.split(':') {
                    for f in store::files(self.root, dir, true, &mut seen)? {
                        if ![".pem", ".crt", ".cer", ".crl"]
                            .iter()
                            .any(|s| f.ends_with(s))
                        {
                            continue;
                        }
                        let text = store::read(&in_root(self.root, &f)?).unwrap_or_default();
                        let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
                        match lines.iter().filter(|l| **l == b"Certificate:").count() {
                            0 => {}
                            1 => items.push(Item::File(f)),
                            _ => items.extend(
                                split(&lines).into_iter().map(|p| Item::Piece(f.clone(), p)),
                            ),
                        }
                    }
                }
            }
        }
        for item in items {
            if trusted {
                self.create_trusted(item)?;
            } else {
                self.create_untrusted(item)?;
            }
        }
        Ok(())
    }

    /// The first certificate of an item, or the script's `Error:` line.
    fn first(&mut self, item: &Item) -> Result<Option<Cert>, CertsError> {
        let found = match item {
            Item::File(f) => store::certs_in(self.root, f)?.into_iter().next(),
            Item::Piece(f, bytes) => super::der::pem_certificates(bytes, 1)
                .into_iter()
                .next()
                .and_then(|c| Cert::new(c, f)),
        };
        if found.is_none() {
            let shown = match item {
                Item::File(f) | Item::Piece(f, _) => f,
            };
            let _ = writeln!(self.err, "certctl: Error: {shown}");
            self.errors += 1;
        }
        Ok(found)
    }

    fn create_untrusted(&mut self, item: Item) -> Result<(), CertsError> {
        let Some(cert) = self.first(&item)? else {
            return Ok(());
        };
        let dest = self.untrustdest.clone();
        self.install(&item, &cert, &dest)
    }

    fn create_trusted(&mut self, item: Item) -> Result<(), CertsError> {
        let Some(cert) = self.first(&item)? else {
            return Ok(());
        };
        let prefix = format!("{:08x}.", cert.hash);
        let untrustdest = self.untrustdest.clone();
        for other in named(self.root, &untrustdest, &prefix)? {
            if store::certs_in(self.root, &other)?.first().map(|c| c.sha1) == Some(cert.sha1) {
                let _ = writeln!(
                    self.err,
                    "certctl: Skipping untrusted certificate {:08x} ({other})",
                    cert.hash
                );
                return Ok(());
            }
        }
        if self.script.skip_duplicates {
            let certdest = self.certdest.clone();
            for other in named(self.root, &certdest, &prefix)? {
                if store::certs_in(self.root, &other)?.first().map(|c| c.sha1) == Some(cert.sha1) {
                    return Ok(());
                }
            }
        }
        let dest = self.certdest.clone();
        self.install(&item, &cert, &dest)
    }

    /// `install [-lrs|-lm] SRC DIR/HASH.N`, N the first free one
    /// (`get_decimal`); a piece is copied, mode 0444.
    fn install(&mut self, item: &Item, cert: &Cert, dir: &str) -> Result<(), CertsError> {
        let dir_host = in_root_strictly(self.root, dir)?;
        let mut n = 0;
        let name = loop {
            let name = format!("{:08x}.{n}", cert.hash);
            if fs::metadata(in_root(self.root, &format!("{dir}/{name}"))?).is_err() {
                break name;
            }
            n += 1;
        };
        let to = dir_host.join(&name);
        let shown = format!("{dir}/{name}");
        let write = |source| CertsError::Write {
            path: shown.clone().into(),
            source,
        };
        match item {
            Item::Piece(_, bytes) => {
                fs::write(&to, bytes).map_err(write)?;
                fs::set_permissions(&to, fs::Permissions::from_mode(0o444)).map_err(write)?;
            }
            Item::File(f) => {
                let real = store::in_root(self.root, f)?;
                match self.script.links {
                    Links::Hard => fs::hard_link(&real, &to).map_err(write)?,
                    Links::Relative => {
                        let src = image_path(self.root, &real);
                        let dst = format!("{}/{name}", image_path(self.root, &dir_host));
                        std::os::unix::fs::symlink(relative(&src, &dst), &to).map_err(write)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The files named `prefix*` under the image's `dir` (`find DIR -name`).
fn named(root: &Path, dir: &str, prefix: &str) -> Result<Vec<String>, CertsError> {
    let mut seen = 0;
    Ok(store::files(root, dir, true, &mut seen)?
        .into_iter()
        .filter(|f| f.rsplit('/').next().is_some_and(|n| n.starts_with(prefix)))
        .collect())
}

/// `egrep '^[^#]' FILE | split -p '^Certificate:$'`: the lines that start
/// with something other than `#`, in pieces each starting at a
/// `Certificate:` line (what comes before the first is a piece too).
fn split(lines: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    for l in lines
        .iter()
        .filter(|l| l.first().is_some_and(|&b| b != b'#'))
    {
        if *l == b"Certificate:" || pieces.is_empty() {
            pieces.push(Vec::new());
        }
        let p = pieces.last_mut().expect("one piece");
        p.extend_from_slice(l);
        p.push(b'\n');
    }
    pieces
}

/// A host path under `root` as the image names it.
fn image_path(root: &Path, host: &Path) -> String {
    format!("/{}", host.strip_prefix(root).unwrap_or(host).display())
}

/// install(1)'s relative link from `dst` to `src` (both absolute): the
/// common leading directories dropped, a `../` for each directory left
/// in `dst`.
pub fn relative(src: &str, dst: &str) -> String {
    let (s, d) = (src.as_bytes(), dst.as_bytes());
    let mut i = 0;
    while i < s.len() && i < d.len() && s[i] == d[i] {
        i += 1;
    }
    while i > 0 && s.get(i) != Some(&b'/') {
        i -= 1;
    }
    let ups = d[i + 1..].iter().filter(|&&b| b == b'/').count();
    format!("{}{}", "../".repeat(ups), &src[i + 1..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_links_as_install_makes_them() {
        assert_eq!(
            relative(
                "/usr/share/certs/trusted/A.pem",
                "/etc/ssl/certs/0123abcd.0"
            ),
            "../../../usr/share/certs/trusted/A.pem"
        );
        assert_eq!(
            relative("/etc/ssl/x/A.pem", "/etc/ssl/certs/h.0"),
            "../x/A.pem"
        );
    }

    #[test]
    fn reads_each_version_of_the_script() {
        let old = Script::read(": ${FILEPAT:=\"\\.pem$|\\.crt$\"}\n: ${BLACKLISTDESTDIR:=${DESTDIR}/etc/ssl/blacklisted}\ninstall ${INSTALLFLAGS} -lrs x\n");
        assert_eq!(old.untrustdest, "${DESTDIR}/etc/ssl/blacklisted");
        assert_eq!(old.scan, Scan::Listing(vec![".pem".into(), ".crt".into()]));
        assert_eq!(old.links, Links::Relative);
        let new = Script::read("case $(grep -c '^Certificate:$' \"$CFILE\") in\nperform install ${INSTALLFLAGS} -m 0444 ${link} \\\n local link=${2:+-lm}\n");
        assert_eq!(new.scan, Scan::Find);
        assert_eq!(new.links, Links::Hard);
    }

    #[test]
    fn split_as_split_p_does() {
        let text: Vec<&[u8]> = vec![b"# c", b"Certificate:", b"a", b"Certificate:", b"b", b""];
        assert_eq!(
            split(&text),
            vec![b"Certificate:\na\n".to_vec(), b"Certificate:\nb\n".to_vec()]
        );
    }
}
