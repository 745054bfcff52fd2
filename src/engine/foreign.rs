//! What may be built for a platform this host is not.
//!
//! Native instructions (COPY, SYSRC, SERVICE, LINE_IN_FILE, RENDER) edit
//! files and run nothing, so a recipe made of them builds for any
//! architecture and OS. RUN and PKG start a process inside the root, which
//! only works when the root's architecture is the host's; jbuild does not
//! emulate. And a RUN on a Linux host starts the root's programs on the
//! host's kernel (namespaces and chroot), which cannot run FreeBSD's: a
//! RUN over a root known to hold another OS's programs
//! ([`crate::plan::RootOs`]) is refused there too. Both are decided after
//! planning, from the plan alone, before any step runs, naming the step,
//! the platform and the host.
//!
//! PKG is a native instruction too when jbuild's own installer does it
//! (the default, [`crate::pkg::install`]): it reads catalogues and writes
//! files, for any architecture on any host. With `[pkg] installer =
//! "pkg"` it starts the root's pkg(8) in the build jail, a process like
//! RUN's, and only builds for the host's architecture.

use std::fmt;

use super::error::{BuildError, ForeignOs};
use crate::image::Platform;
use crate::jailfile::{Command, Op};
use crate::plan::{Plan, StepKind};

/// The machine a build runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host<'a> {
    /// As Rust names it (`std::env::consts::OS`): `linux`, `freebsd`.
    pub os: &'a str,
    /// As [`crate::config::host_architecture`] names it: `amd64`, `arm64`.
    pub arch: &'a str,
    /// PKG starts pkg(8) in the root (`[pkg] installer = "pkg"`) rather
    /// than being installed by jbuild.
    pub pkg_in_jail: bool,
}

impl Host<'static> {
    /// This machine.
    pub fn this() -> Self {
        Host {
            os: std::env::consts::OS,
            arch: crate::config::host_architecture(),
            pkg_in_jail: false,
        }
    }
}

impl fmt::Display for Host<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)
    }
}

/// Whether a process built for `platform` runs on a host of architecture
/// `host_arch` (as [`crate::config::host_architecture`] names it). The
/// architecture only: the OS is [`os_runs_here`]'s.
pub fn runs_here(platform: &Platform, host_arch: &str) -> bool {
    // Normalised as a platform's (`x86_64` is `amd64`), whatever the OS
    // says, an image config naming none included.
    let arch = |a: &str| Platform::parse(&format!("any/{a}")).map(|p| p.architecture);
    matches!((arch(&platform.architecture), arch(host_arch)), (Ok(a), Ok(b)) if a == b)
}

/// Whether a RUN over a root of programs for `root_os` can start them on a
/// host running `host_os`. Linux runs only Linux programs (its executor
/// uses the host's kernel); FreeBSD runs its own in jails, and Linux ones
/// through its Linux ABI, as it always has.
pub fn os_runs_here(root_os: &str, host_os: &str) -> bool {
    host_os != "linux" || root_os == "linux"
}

/// Refuses the plan when a RUN or PKG step of a stage it needs is for an
/// architecture this host cannot run, or a RUN is over a root whose OS it
/// cannot run: the first such step, located, with its platform.
pub fn check_runnable(plan: &Plan, host: &Host<'_>) -> Result<(), BuildError> {
    for stage in &plan.stages {
        let platform = &stage.state.platform;
        let arch_ok = runs_here(platform, host.arch);
        let foreign_os = stage
            .root_os
            .as_ref()
            .filter(|r| !os_runs_here(&r.os, host.os));
        for ps in &stage.steps {
            let StepKind::Layer { .. } = &ps.kind else {
                continue;
            };
            let err = match &ps.step.op {
                Op::Pkg { .. } if !arch_ok && !host.pkg_in_jail => continue,
                Op::Run { .. } | Op::Pkg { .. } if !arch_ok => BuildError::Foreign {
                    platform: platform.clone(),
                    host: host.arch.to_string(),
                },
                Op::Run { command, .. } => match foreign_os {
                    Some(root) => BuildError::ForeignOs(Box::new(ForeignOs {
                        platform: platform.clone(),
                        host: host.to_string(),
                        root: root.clone(),
                        pkg_line: pkg_line(command),
                    })),
                    None => continue,
                },
                _ => continue,
            };
            return Err(err.located(&ps.step.location).with_step(&ps.step.text));
        }
    }
    Ok(())
}

/// The PKG line that does what `command` does, when it only installs
/// packages: `pkg install [-y|--yes] NAME...` (names or origins), its
/// words on one line or several (`\`), optionally after
/// `ASSUME_ALWAYS_YES=...` or `env ASSUME_ALWAYS_YES=...` (PKG never asks),
/// optionally followed by `&& pkg clean ...` (PKG's package cache is a
/// mount that never reaches the layer, so there is nothing to clean).
pub fn pkg_line(command: &Command) -> Option<String> {
    let words: Vec<&str> = match command {
        Command::Exec(argv) => argv.iter().map(String::as_str).collect(),
        Command::Shell(s) => {
            let mut parts = s.split("&&");
            let first = parts.next()?;
            let clean_only = parts.all(|p| {
                let w: Vec<&str> = shell_words(p);
                matches!(pkg_args(&w), Some(["clean", flags @ ..])
                    if flags.iter().all(|f| f.starts_with('-') && plain(f)))
            });
            if !clean_only {
                return None;
            }
            shell_words(first)
        }
    };
    let ["install", rest @ ..] = pkg_args(&words)? else {
        return None;
    };
    let packages: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|w| !matches!(*w, "-y" | "--yes"))
        .collect();
    let names = packages.iter().all(|p| !p.starts_with('-') && plain(p));
    (names && !packages.is_empty()).then(|| format!("PKG {}", packages.join(" ")))
}

/// The words of one command of a shell line, a `\` that ends a line (a
/// continuation the recipe kept) read as the space it stands for.
fn shell_words(text: &str) -> Vec<&str> {
    text.split_whitespace().filter(|w| *w != "\\").collect()
}

/// What follows `pkg` in `words`, a command that runs pkg(8) with no
/// setting but `ASSUME_ALWAYS_YES` (as `NAME=value` before it, or through
/// `env`): `None` for any other command.
fn pkg_args<'a, 'w>(words: &'a [&'w str]) -> Option<&'a [&'w str]> {
    let mut rest = words;
    if let ["env", after @ ..] = rest {
        rest = after;
    }
    while let [word, after @ ..] = rest {
        match word.split_once('=') {
            Some(("ASSUME_ALWAYS_YES", value)) if plain(value) => rest = after,
            _ => break,
        }
    }
    match rest {
        [pkg, args @ ..] if is_pkg(pkg) => Some(args),
        _ => None,
    }
}

fn is_pkg(word: &str) -> bool {
    matches!(word, "pkg" | "/usr/sbin/pkg")
}

/// A word the shell leaves as it is: a package name or origin, a flag.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.+@/".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blame::Blame;
    use crate::digest::Digest;
    use crate::jailfile::{self, CopySource};
    use crate::plan::{self, BaseImage, InputError, InputSource, Inputs, PlanOptions};
    use std::path::Path;

    const AMD64: Host<'static> = Host {
        os: "linux",
        arch: "amd64",
        pkg_in_jail: false,
    };
    const FREEBSD: Host<'static> = Host {
        os: "freebsd",
        arch: "amd64",
        pkg_in_jail: false,
    };

    /// Answers for recipes `FROM scratch`, `FROM freebsd:<release>` and
    /// `FROM os-<os>:1` (an image whose config says that `os`; `os-none:1`
    /// says none): context sources and releases hash to constants.
    struct Scratch;

    impl InputSource for Scratch {
        fn image(&self, r: &str, _: &Platform) -> Result<BaseImage, InputError> {
            let os = r.strip_prefix("os-").and_then(|r| r.strip_suffix(":1"));
            let os = os.map(|o| if o == "none" { "" } else { o });
            let os = os.ok_or_else(|| InputError::user(format!("no image {r} here")))?;
            let config = serde_json::from_str(&format!(
                r#"{{"architecture":"amd64","os":"{os}","rootfs":{{"type":"layers","diff_ids":[]}}}}"#
            ))
            .unwrap();
            Ok(BaseImage {
                manifest: Digest::of(r.as_bytes()),
                config,
                extras: Default::default(),
            })
        }
        fn context_sources(&self, _: &[CopySource]) -> Result<Digest, InputError> {
            Ok(Digest::of(b"context"))
        }
        fn release(&self, _: &str, _: &Platform) -> Result<Vec<(String, Digest)>, InputError> {
            Ok(vec![("base".into(), Digest::of(b"base.txz"))])
        }
    }

    fn plan_for(text: &str, platform: &str) -> Plan {
        let build = jailfile::load_str(Path::new("Jailfile"), text, &Default::default()).unwrap();
        let opts = PlanOptions {
            platform: Some(Platform::parse(platform).unwrap()),
            no_cache_nonce: None,
            target: None,
            pkg_scripts: Default::default(),
        };
        plan::plan(&build, &Inputs::gather(&build, &opts, &Scratch), &opts).unwrap()
    }

    #[test]
    fn only_the_architecture_decides() {
        let p = |s| Platform::parse(s).unwrap();
        assert!(runs_here(&p("freebsd/amd64"), "amd64"));
        assert!(runs_here(&p("linux/amd64"), "amd64"));
        assert!(runs_here(&p("freebsd/x86_64"), "amd64"));
        assert!(runs_here(&p("freebsd/arm64/v8"), "arm64"));
        assert!(!runs_here(&p("freebsd/arm64"), "amd64"));
        assert!(!runs_here(&p("freebsd/riscv64"), "arm64"));
        let no_os = |arch: &str| Platform {
            os: String::new(),
            architecture: arch.into(),
            variant: None,
        };
        assert!(runs_here(&no_os("amd64"), "amd64"));
        assert!(runs_here(&no_os("x86_64"), "amd64"));
        assert!(!runs_here(&no_os("arm64"), "amd64"));
        assert!(!runs_here(&no_os(""), "amd64"));
    }

    #[test]
    fn native_steps_build_anywhere_and_run_steps_only_natively() {
        let native = "FROM scratch\nCOPY a /a\nSYSRC sshd_enable=YES\nLABEL x=y\n";
        check_runnable(&plan_for(native, "freebsd/arm64"), &AMD64).unwrap();
        check_runnable(&plan_for(native, "freebsd/riscv64"), &AMD64).unwrap();

        let run = "FROM scratch\nCOPY a /a\nRUN echo hi\n";
        check_runnable(&plan_for(run, "freebsd/amd64"), &AMD64).unwrap();
        let err = check_runnable(&plan_for(run, "freebsd/arm64"), &AMD64).unwrap_err();
        assert!(err.is_user_error());
        let text = err.to_string();
        assert!(text.contains("Jailfile:3"), "{text}");
        assert!(text.contains("RUN echo hi"), "{text}");
        assert!(
            text.contains("freebsd/arm64") && text.contains("amd64 host"),
            "{text}"
        );

        // PKG by pkg(8) in the jail runs a process; by jbuild it does not.
        let pkg = "FROM scratch\nPKG nginx\n";
        let in_jail = Host {
            pkg_in_jail: true,
            ..AMD64
        };
        let err = check_runnable(&plan_for(pkg, "freebsd/arm64"), &in_jail).unwrap_err();
        assert!(err.to_string().contains("Jailfile:2"), "{err}");
        check_runnable(&plan_for(pkg, "freebsd/arm64"), &AMD64).unwrap();
    }

    #[test]
    fn a_stage_the_target_does_not_need_is_not_checked() {
        let text = "FROM scratch AS unused\nRUN echo hi\nFROM scratch\nCOPY a /a\n";
        check_runnable(&plan_for(text, "freebsd/arm64"), &AMD64).unwrap();
    }

    #[test]
    fn a_linux_host_refuses_run_over_a_root_known_to_be_freebsd() {
        let refused = |text: &str| {
            let err = check_runnable(&plan_for(text, "freebsd/amd64"), &AMD64).unwrap_err();
            assert!(err.is_user_error());
            err.to_string()
        };
        let text = refused("FROM freebsd:14.3-RELEASE\nCOPY a /a\nRUN echo hi\n");
        assert!(text.starts_with("Jailfile:3:1: `RUN echo hi`: "), "{text}");
        assert!(
            text.contains("FreeBSD programs (a freebsd/amd64 root, as `FROM freebsd:14.3-RELEASE` says) on this linux/amd64 host"),
            "{text}"
        );
        assert!(
            !text.contains("PKG") && !text.contains("--platform"),
            "{text}"
        );

        // Known from an image's config, through a stage built on it.
        let text = refused("FROM os-freebsd:1 AS base\nSYSRC a=b\nFROM base\nRUN true\n");
        assert!(text.starts_with("Jailfile:4:1: "), "{text}");
        assert!(
            text.contains("as the config of image `os-freebsd:1` says"),
            "{text}"
        );
        assert!(
            text.contains("build it with --platform linux/amd64"),
            "{text}"
        );

        // A RUN that only installs packages is told its PKG line.
        let text = refused(
            "FROM freebsd:14.3-RELEASE\nRUN pkg install -y nginx py311-certbot && pkg clean -ay\n",
        );
        assert!(
            text.contains(
                "`PKG nginx py311-certbot` does the same as this line, and builds on any host: \
                 jbuild installs the packages itself"
            ),
            "{text}"
        );

        // PKG is jbuild's own, not a process in the root; FROM scratch,
        // images with no OS or a Linux one run, and any of it on FreeBSD.
        for ok in [
            "FROM freebsd:14.3-RELEASE\nPKG nginx\n",
            "FROM scratch\nCOPY busybox /bin/busybox\nRUN true\n",
            "FROM os-none:1\nRUN true\n",
            "FROM os-linux:1\nRUN true\n",
        ] {
            check_runnable(&plan_for(ok, "freebsd/amd64"), &AMD64).unwrap();
        }
        check_runnable(
            &plan_for("FROM freebsd:14.3-RELEASE\nRUN true\n", "freebsd/amd64"),
            &FREEBSD,
        )
        .unwrap();
        check_runnable(
            &plan_for("FROM os-linux:1\nRUN true\n", "freebsd/amd64"),
            &FREEBSD,
        )
        .unwrap();
    }

    #[test]
    fn the_architecture_is_checked_before_the_os() {
        let plan = plan_for("FROM freebsd:14.3-RELEASE\nRUN true\n", "freebsd/arm64");
        let err = check_runnable(&plan, &AMD64).unwrap_err();
        assert!(
            err.to_string().contains("only native instructions"),
            "{err}"
        );
    }

    #[test]
    fn only_a_run_that_only_installs_packages_has_a_pkg_line() {
        let shell = |s: &str| pkg_line(&Command::Shell(s.into()));
        assert_eq!(shell("pkg install -y nginx").as_deref(), Some("PKG nginx"));
        assert_eq!(
            shell("pkg install nginx curl").as_deref(),
            Some("PKG nginx curl")
        );
        assert_eq!(
            shell("/usr/sbin/pkg install --yes www/nginx && pkg clean -a -y").as_deref(),
            Some("PKG www/nginx")
        );
        let exec = pkg_line(&Command::Exec(vec![
            "pkg".into(),
            "install".into(),
            "-y".into(),
            "git".into(),
        ]));
        assert_eq!(exec.as_deref(), Some("PKG git"));
        for (given, line) in [
            ("ASSUME_ALWAYS_YES=yes pkg install nginx", "PKG nginx"),
            (
                "env ASSUME_ALWAYS_YES=yes pkg install -y nginx && env ASSUME_ALWAYS_YES=yes pkg clean -a",
                "PKG nginx",
            ),
            ("pkg install -y \\\n    nginx \\\n    curl", "PKG nginx curl"),
        ] {
            assert_eq!(shell(given).as_deref(), Some(line), "{given}");
        }
        let exec = pkg_line(&Command::Exec(
            ["env", "ASSUME_ALWAYS_YES=YES", "pkg", "install", "git"]
                .map(String::from)
                .to_vec(),
        ));
        assert_eq!(exec.as_deref(), Some("PKG git"));
        for other in [
            "ABI=FreeBSD:13:amd64 pkg install -y nginx",
            "env -i pkg install -y nginx",
            "ASSUME_ALWAYS_YES=$Y pkg install nginx",
            "pkg install -y",
            "pkg install -r FreeBSD nginx",
            "pkg install -y nginx && service nginx enable",
            "pkg install -y nginx; pkg clean -ay",
            "pkg install -y $PKGS",
            "pkg update && pkg install -y nginx",
            "pkg upgrade -y",
            "echo pkg install nginx",
        ] {
            assert_eq!(shell(other), None, "{other}");
        }
    }
}
