//! The interpreter's tests: a test host that records what it is asked,
//! and scripts of each kind the ports tree has.

mod files;
mod hostile;
mod smoke;
mod templates;

use std::path::Path;

use super::{parse, run, CommandError, Env, Host, Io, Limits, Ran, ScriptError};

/// A host that records every command and answers from a table.
#[derive(Default)]
pub(super) struct Recorder {
    pub calls: Vec<Vec<String>>,
    /// (name, status, stdout) answers by the command's first words.
    pub answers: Vec<(Vec<String>, i32, String)>,
    pub known: Vec<String>,
}

impl Host for Recorder {
    fn command(
        &mut self,
        name: &str,
        args: &[String],
        io: &mut Io<'_>,
    ) -> Result<i32, CommandError> {
        let mut argv = vec![name.to_string()];
        argv.extend(args.iter().cloned());
        self.calls.push(argv.clone());
        for (prefix, status, out) in &self.answers {
            if argv.starts_with(prefix) {
                io.stdout.extend_from_slice(out.as_bytes());
                return Ok(*status);
            }
        }
        if self.known.iter().any(|k| k == name) {
            return Ok(0);
        }
        Err(CommandError::Unknown {
            command: name.to_string(),
        })
    }

    fn knows(&self, name: &str) -> bool {
        self.known.iter().any(|k| k == name)
    }
}

/// Runs `text` in `root` with `args` as `$1…`.
pub(super) fn sh(root: &Path, text: &str, host: &mut Recorder) -> Result<Ran, ScriptError> {
    let script = parse(text)?;
    run(root, &script, &Env::default(), host, &Limits::default())
}

/// Runs `text` and gives its stdout (status must be 0).
pub(super) fn out(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut host = Recorder::default();
    let ran = sh(dir.path(), text, &mut host).unwrap();
    assert_eq!(
        ran.status,
        0,
        "{text}: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    String::from_utf8(ran.stdout).unwrap()
}
