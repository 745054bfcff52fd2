//! `test` and `[` as FreeBSD's test(1): strings, integers, files (inside
//! the root; the interpreter runs as the image's root user, so a file
//! that exists is readable and writable), `!`, `-a`, `-o`, parentheses.
//! A malformed expression is status 2 with test's message.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};

use super::path;
use super::shell::{Shell, Streams};

const UNARY: &[&str] = &[
    "-b", "-c", "-d", "-e", "-f", "-g", "-h", "-k", "-L", "-n", "-O", "-G", "-p", "-r", "-s", "-S",
    "-t", "-u", "-w", "-x", "-z",
];
const BINARY: &[&str] = &[
    "=", "==", "!=", "<", ">", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "-nt", "-ot", "-ef",
];

struct Parser<'a, 'b> {
    args: &'a [String],
    i: usize,
    sh: &'a Shell<'b>,
}

type T = Result<bool, String>;

impl Shell<'_> {
    pub(crate) fn test(&self, args: &[String], s: &mut Streams, bracket: bool) -> i32 {
        let args = if bracket {
            match args.split_last() {
                Some((last, rest)) if last == "]" => rest,
                _ => {
                    s.err.extend_from_slice(b"[: missing ]\n");
                    return 2;
                }
            }
        } else {
            args
        };
        let mut p = Parser {
            args,
            i: 0,
            sh: self,
        };
        let r = if args.is_empty() {
            Ok(false)
        } else {
            p.or().and_then(|v| {
                if p.i < args.len() {
                    Err(format!("{}: unexpected operator", args[p.i]))
                } else {
                    Ok(v)
                }
            })
        };
        match r {
            Ok(v) => i32::from(!v),
            Err(m) => {
                s.err.extend_from_slice(
                    format!("{}: {m}\n", if bracket { "[" } else { "test" }).as_bytes(),
                );
                2
            }
        }
    }
}

impl Parser<'_, '_> {
    fn peek(&self, k: usize) -> Option<&str> {
        self.args.get(self.i + k).map(String::as_str)
    }

    fn or(&mut self) -> T {
        let mut v = self.and()?;
        while self.peek(0) == Some("-o") {
            self.i += 1;
            let r = self.and()?;
            v = v || r;
        }
        Ok(v)
    }

    fn and(&mut self) -> T {
        let mut v = self.not()?;
        while self.peek(0) == Some("-a") {
            self.i += 1;
            let r = self.not()?;
            v = v && r;
        }
        Ok(v)
    }

    fn not(&mut self) -> T {
        // `! x` negates, unless `!` is the left of a binary operator.
        if self.peek(0) == Some("!")
            && !self
                .peek(1)
                .is_some_and(|o| BINARY.contains(&o) && self.peek(2).is_some())
        {
            self.i += 1;
            if self.peek(0).is_none() {
                return Ok(true); // `test !`: the string "!"
            }
            return Ok(!self.not()?);
        }
        self.primary()
    }

    fn primary(&mut self) -> T {
        let Some(a) = self.peek(0).map(str::to_string) else {
            return Err("argument expected".into());
        };
        if let (Some(op), Some(b)) = (self.peek(1), self.peek(2)) {
            if BINARY.contains(&op) {
                let (op, b) = (op.to_string(), b.to_string());
                self.i += 3;
                return self.binary(&a, &op, &b);
            }
        }
        if a == "(" && self.peek(1).is_some() {
            self.i += 1;
            let v = self.or()?;
            if self.peek(0) != Some(")") {
                return Err("closing paren expected".into());
            }
            self.i += 1;
            return Ok(v);
        }
        if UNARY.contains(&a.as_str()) {
            if let Some(x) = self.peek(1).map(str::to_string) {
                self.i += 2;
                return Ok(self.unary(&a, &x));
            }
        }
        self.i += 1;
        Ok(!a.is_empty())
    }

    fn unary(&self, op: &str, x: &str) -> bool {
        match op {
            "-n" => return !x.is_empty(),
            "-z" => return x.is_empty(),
            "-t" => return false,
            _ => {}
        }
        let follow = !matches!(op, "-h" | "-L");
        let Ok(host) = path::host(&self.sh.root, &self.sh.state.cwd, x, follow) else {
            return false;
        };
        let meta = if follow {
            host.metadata()
        } else {
            host.symlink_metadata()
        };
        let Ok(m) = meta else { return false };
        let ft = m.file_type();
        let mode = m.permissions().mode();
        match op {
            "-e" | "-r" | "-w" => true,
            "-f" => ft.is_file(),
            "-d" => ft.is_dir(),
            "-h" | "-L" => ft.is_symlink(),
            "-s" => m.len() > 0,
            "-x" => ft.is_dir() || mode & 0o111 != 0,
            "-p" => ft.is_fifo(),
            "-S" => ft.is_socket(),
            "-b" => ft.is_block_device(),
            "-c" => ft.is_char_device(),
            "-u" => mode & 0o4000 != 0,
            "-g" => mode & 0o2000 != 0,
            "-k" => mode & 0o1000 != 0,
            "-O" => m.uid() == 0,
            "-G" => m.gid() == 0,
            _ => false,
        }
    }

    fn binary(&self, a: &str, op: &str, b: &str) -> T {
        let int = |x: &str| -> Result<i64, String> {
            x.trim()
                .parse::<i64>()
                .map_err(|_| format!("{x}: bad number"))
        };
        Ok(match op {
            "=" | "==" => a == b,
            "!=" => a != b,
            "<" => a < b,
            ">" => a > b,
            "-eq" => int(a)? == int(b)?,
            "-ne" => int(a)? != int(b)?,
            "-lt" => int(a)? < int(b)?,
            "-le" => int(a)? <= int(b)?,
            "-gt" => int(a)? > int(b)?,
            "-ge" => int(a)? >= int(b)?,
            "-nt" | "-ot" | "-ef" => {
                let meta = |x: &str| {
                    path::host(&self.sh.root, &self.sh.state.cwd, x, true)
                        .ok()
                        .and_then(|h| h.metadata().ok())
                };
                match (meta(a), meta(b), op) {
                    (Some(x), Some(y), "-nt") => x.mtime() > y.mtime(),
                    (Some(_), None, "-nt") => true,
                    (Some(x), Some(y), "-ot") => x.mtime() < y.mtime(),
                    (None, Some(_), "-ot") => true,
                    (Some(x), Some(y), "-ef") => x.dev() == y.dev() && x.ino() == y.ino(),
                    _ => false,
                }
            }
            _ => return Err(format!("{op}: unknown operand")),
        })
    }
}
