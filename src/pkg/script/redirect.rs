//! Redirections: `<`, `>`, `>>`, `>|`, `<>`, `n>&m`, here-documents; files
//! inside the root (opened without following a last symlink, which
//! [`super::path::host`] has already resolved inside the root),
//! `/dev/null`, `/dev/stdout`, `/dev/stderr`. Outputs are gathered while
//! the command runs, then written where the redirections send them, in
//! order (standard output first).

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::rc::Rc;

use brush_parser::ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T, IoRedirect};

use super::path;
use super::shell::{Shell, Streams, R};
use super::{CommandError, ScriptError};

/// Where a command's stream 1 or 2 goes.
#[derive(Debug, Clone, PartialEq)]
enum Dest {
    /// The enclosing stream: 1 its output, 2 its error output.
    Outer(u8),
    File(PathBuf),
    Null,
}

impl Shell<'_> {
    /// Runs `f` with `redirects` applied to its streams.
    pub(crate) fn with_redirects(
        &mut self,
        redirects: &[IoRedirect],
        s: &mut Streams,
        f: impl FnOnce(&mut Self, &mut Streams) -> R<i32>,
    ) -> R<i32> {
        if redirects.is_empty() {
            return f(self, s);
        }
        let mut dests = [Dest::Outer(1), Dest::Outer(2)];
        let mut input: Option<Vec<u8>> = None;
        for r in redirects {
            match self.redirect(r, &mut dests, &mut input, s)? {
                Ok(()) => {}
                Err(message) => {
                    // sh: the command does not run, its status is 2.
                    s.err
                        .extend_from_slice(format!("sh: {message}\n").as_bytes());
                    return Ok(2);
                }
            }
        }
        let mut inner = match input {
            Some(bytes) => Streams::with_input(bytes),
            None => Streams {
                input: Rc::clone(&s.input),
                pos: s.pos,
                ..Streams::default()
            },
        };
        let shares_input = Rc::ptr_eq(&inner.input, &s.input);
        let r = f(self, &mut inner);
        if shares_input {
            s.pos = inner.pos;
        }
        let out = std::mem::take(&mut inner.out);
        let err = std::mem::take(&mut inner.err);
        self.route(&dests[0], out, s)?;
        self.route(&dests[1], err, s)?;
        self.check_output(s)?;
        r
    }

    fn route(&mut self, d: &Dest, bytes: Vec<u8>, s: &mut Streams) -> R<()> {
        match d {
            Dest::Outer(1) => s.out.extend_from_slice(&bytes),
            Dest::Outer(_) => s.err.extend_from_slice(&bytes),
            Dest::Null => {}
            Dest::File(p) => {
                if bytes.is_empty() {
                    return Ok(());
                }
                self.count_written(bytes.len())?;
                let mut f = OpenOptions::new()
                    .append(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(p)
                    .map_err(|e| self.io_fault(p, e))?;
                f.write_all(&bytes).map_err(|e| self.io_fault(p, e))?;
            }
        }
        Ok(())
    }

    pub(crate) fn count_written(&mut self, n: usize) -> R<()> {
        self.used.written += n;
        if self.used.written > self.limits.output_bytes {
            return Err(self.limit(format!(
                "{} bytes written to files",
                self.limits.output_bytes
            )));
        }
        Ok(())
    }

    pub(crate) fn io_fault(&self, p: &std::path::Path, e: std::io::Error) -> super::shell::Ctl {
        ScriptError::Command {
            command: "redirection".into(),
            line: self.line,
            source: CommandError::Io {
                path: p.to_path_buf(),
                source: e,
            },
        }
        .into()
    }

    /// Applies one redirection; `Ok(Err(message))` is sh's failure to
    /// open (the command is not run).
    fn redirect(
        &mut self,
        r: &IoRedirect,
        dests: &mut [Dest; 2],
        input: &mut Option<Vec<u8>>,
        s: &mut Streams,
    ) -> R<Result<(), String>> {
        match r {
            IoRedirect::HereDocument(fd, doc) => {
                if fd.unwrap_or(0) != 0 {
                    return Err(self.unsupported("a here-document to a descriptor other than 0"));
                }
                let text = if doc.requires_expansion {
                    self.expand_heredoc(&doc.doc.value, s)?
                } else {
                    doc.doc.value.clone()
                };
                let text = if doc.remove_tabs {
                    text.lines()
                        .map(|l| format!("{}\n", l.trim_start_matches('\t')))
                        .collect()
                } else {
                    text
                };
                *input = Some(text.into_bytes());
                Ok(Ok(()))
            }
            IoRedirect::HereString(..) => Err(self.unsupported("`<<<` (bash)")),
            IoRedirect::OutputAndError(..) => Err(self.unsupported("`&>` (bash)")),
            IoRedirect::File(fd, kind, target) => {
                let fd = fd.unwrap_or(match kind {
                    K::Read | K::ReadAndWrite | K::DuplicateInput => 0,
                    _ => 1,
                });
                if fd > 2 {
                    return Err(self.unsupported(format!("file descriptor {fd}")));
                }
                let word = match target {
                    T::Filename(w) | T::Duplicate(w) => self.expand_string(&w.value, s)?,
                    T::Fd(n) => n.to_string(),
                    T::ProcessSubstitution(..) => {
                        return Err(self.unsupported("process substitution (bash)"))
                    }
                };
                let duplicate = matches!(kind, K::DuplicateInput | K::DuplicateOutput)
                    || matches!(target, T::Fd(_) | T::Duplicate(_));
                if duplicate {
                    return self.duplicate(fd, &word, dests);
                }
                self.open(fd, kind, &word, dests, input)
            }
        }
    }

    fn duplicate(&mut self, fd: i32, word: &str, dests: &mut [Dest; 2]) -> R<Result<(), String>> {
        if word == "-" {
            if fd >= 1 {
                dests[fd as usize - 1] = Dest::Null;
            }
            return Ok(Ok(()));
        }
        let to: i32 = match word.parse() {
            Ok(n) => n,
            Err(_) => return Ok(Err(format!("{word}: bad file descriptor"))),
        };
        match (fd, to) {
            (0, 0) => {}
            (0, _) => return Err(self.unsupported(format!("input from descriptor {to}"))),
            (_, 1 | 2) => dests[fd as usize - 1] = dests[to as usize - 1].clone(),
            (_, 0) => dests[fd as usize - 1] = Dest::Null,
            _ => return Err(self.unsupported(format!("file descriptor {to}"))),
        }
        Ok(Ok(()))
    }

    fn open(
        &mut self,
        fd: i32,
        kind: &K,
        word: &str,
        dests: &mut [Dest; 2],
        input: &mut Option<Vec<u8>>,
    ) -> R<Result<(), String>> {
        let logical = path::logical(&self.state.cwd, word);
        let special = match logical.as_str() {
            "/dev/null" => Some(Dest::Null),
            "/dev/stdout" => Some(Dest::Outer(1)),
            "/dev/stderr" => Some(Dest::Outer(2)),
            l if l.starts_with("/dev/") => return Err(self.unsupported(format!("the device {l}"))),
            _ => None,
        };
        if let Some(d) = special {
            match fd {
                0 => *input = Some(Vec::new()),
                _ => dests[fd as usize - 1] = d,
            }
            return Ok(Ok(()));
        }
        let host = match path::host(&self.root, &self.state.cwd, word, true) {
            Ok(h) => h,
            Err(e) => return Ok(Err(format!("{word}: {}", path::strerror(&e)))),
        };
        match kind {
            K::Read => {
                let read = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&host)
                    .and_then(|f| {
                        let mut v = Vec::new();
                        f.take(self.limits.output_bytes as u64 + 1)
                            .read_to_end(&mut v)
                            .map(|_| v)
                    });
                match read {
                    Ok(v) if v.len() > self.limits.output_bytes => {
                        Err(self.limit(format!("{} bytes of input", self.limits.output_bytes)))
                    }
                    Ok(v) => {
                        *input = Some(v);
                        Ok(Ok(()))
                    }
                    Err(e) => Ok(Err(format!("cannot open {word}: {}", path::strerror(&e)))),
                }
            }
            _ => {
                let mut o = OpenOptions::new();
                o.write(true)
                    .create(true)
                    .mode(0o666 & !0o022)
                    .custom_flags(libc::O_NOFOLLOW);
                if matches!(kind, K::Write | K::Clobber) {
                    o.truncate(true);
                }
                match o.open(&host) {
                    Ok(_) => {}
                    Err(e) if crate::fsutil::path_at_fault(&e) => {
                        return Ok(Err(format!("cannot create {word}: {}", path::strerror(&e))))
                    }
                    Err(e) => return Err(self.io_fault(&host, e)),
                }
                match fd {
                    0 => *input = Some(Vec::new()),
                    _ => dests[fd as usize - 1] = Dest::File(host),
                }
                Ok(Ok(()))
            }
        }
    }
}
