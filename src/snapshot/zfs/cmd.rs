//! Running the `zfs` command and reading its `-H` output.
//!
//! jbuild drives ZFS through the `zfs` command (no libzfs binding): it is
//! the interface that stays stable between OpenZFS, FreeBSD's ZFS and
//! zfs-fuse, and its messages are what an administrator would see too.
//! Messages are read in the C locale, so the few that jbuild acts on
//! (`dataset already exists`, `dataset is busy`, ...) can be matched.

use std::ffi::OsStr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What went wrong running `zfs`.
#[derive(Debug)]
pub(super) enum CmdError {
    /// The command could not be started at all (not installed, not on PATH).
    Spawn(std::io::Error),
    /// The command ran and failed; `stderr` is its message.
    Failed { command: String, stderr: String },
}

impl CmdError {
    /// Whether the failure's message contains `needle`.
    pub(super) fn says(&self, needle: &str) -> bool {
        match self {
            CmdError::Failed { stderr, .. } => stderr.contains(needle),
            CmdError::Spawn(_) => false,
        }
    }
}

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmdError::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => write!(
                f,
                "the `zfs` command is not installed (or not on PATH): install ZFS, or use --backend dir"
            ),
            CmdError::Spawn(e) => write!(f, "cannot run `zfs`: {e}"),
            CmdError::Failed { command, stderr } => {
                write!(f, "`{command}` failed: {}", stderr.trim_end())
            }
        }
    }
}

/// Runs `zfs args...` and returns its standard output.
pub(super) fn zfs<S: AsRef<OsStr>>(args: &[S]) -> Result<String, CmdError> {
    let out = Command::new("zfs")
        .args(args)
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .map_err(CmdError::Spawn)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if stderr.trim().is_empty() {
        stderr = format!("exit status {}", out.status);
    }
    Err(CmdError::Failed {
        command: std::iter::once("zfs".to_string())
            .chain(
                args.iter()
                    .map(|a| a.as_ref().to_string_lossy().into_owned()),
            )
            .collect::<Vec<_>>()
            .join(" "),
        stderr,
    })
}

/// Runs `zfs args...`, retrying for a while when the dataset is busy.
/// On zfs-fuse a file's last close reaches the daemon asynchronously, so a
/// dataset can be "busy" for a moment after its last user let go of it.
pub(super) fn zfs_when_idle<S: AsRef<OsStr>>(args: &[S]) -> Result<String, CmdError> {
    let deadline = Instant::now() + BUSY_PATIENCE;
    let mut pause = Duration::from_millis(10);
    loop {
        match zfs(args) {
            Err(e) if e.says("is busy") && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            r => return r,
        }
    }
}

/// How long [`zfs_when_idle`] waits for a busy dataset.
const BUSY_PATIENCE: Duration = Duration::from_secs(5);

/// One line of `zfs get -H -o name,property,value,source`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Prop<'a> {
    pub name: &'a str,
    pub property: &'a str,
    pub value: &'a str,
    pub source: &'a str,
}

/// Splits `zfs get -H -o name,property,value,source` output. The value is
/// everything between the second and the last tab, so a value holding a
/// tab (a property someone else set) cannot shift the columns.
pub(super) fn parse_get(out: &str) -> impl Iterator<Item = Prop<'_>> {
    out.lines().filter_map(|line| {
        let (name, rest) = line.split_once('\t')?;
        let (property, rest) = rest.split_once('\t')?;
        let (value, source) = rest.rsplit_once('\t')?;
        Some(Prop {
            name,
            property,
            value,
            source,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_output_is_split_on_tabs_with_the_value_in_the_middle() {
        let out = "tank/j/a\tjbuild:key\tsha256:00\tlocal\n\
                   tank/j/a\tcom.x:odd\ta\tb\tlocal\n\
                   tank/j/b\torigin\ttank/j/a@jbuild\t-\n\
                   garbage line\n";
        let got: Vec<Prop<'_>> = parse_get(out).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[1],
            Prop {
                name: "tank/j/a",
                property: "com.x:odd",
                value: "a\tb",
                source: "local"
            }
        );
        assert_eq!(got[2].value, "tank/j/a@jbuild");
        assert_eq!(got[2].source, "-");
    }

    #[test]
    fn a_missing_command_says_what_to_do() {
        let e = CmdError::Spawn(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(e.to_string().contains("--backend dir"), "{e}");
        let e = CmdError::Failed {
            command: "zfs create tank/x".into(),
            stderr: "cannot create 'tank/x': dataset already exists\n".into(),
        };
        assert!(e.says("already exists"));
        assert_eq!(
            e.to_string(),
            "`zfs create tank/x` failed: cannot create 'tank/x': dataset already exists"
        );
    }
}
