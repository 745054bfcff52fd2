//! The syntax tree: each instruction's arguments split into their parts,
//! still as [`Text`] with positions and still unsubstituted (the values of
//! variables depend on where the instruction ends up, which only the
//! resolver knows).

use super::heredoc::Heredoc;
use super::resolved::SysrcOp;
use super::text::{Span, Text};

/// Instruction keywords jbuild understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    From,
    Arg,
    Env,
    Label,
    Run,
    Pkg,
    Copy,
    Add,
    Sysrc,
    Service,
    LineInFile,
    Render,
    Include,
    Jail,
    User,
    Workdir,
    Expose,
    Volume,
    Cmd,
    Entrypoint,
    StopSignal,
    Healthcheck,
    Onbuild,
    Shell,
    Maintainer,
}

/// Every keyword with its canonical spelling and usage line.
pub(crate) const KEYWORDS: &[(Keyword, &str, &str)] = &[
    (
        Keyword::From,
        "FROM",
        "FROM [--platform=os/arch] image [AS name]",
    ),
    (Keyword::Arg, "ARG", "ARG name[=default] ..."),
    (Keyword::Env, "ENV", "ENV key=value ..."),
    (Keyword::Label, "LABEL", "LABEL key=value ..."),
    (
        Keyword::Run,
        "RUN",
        "RUN [--network=host|none|default] [--mount=type=secret|cache|tmpfs|bind,...] command",
    ),
    (Keyword::Pkg, "PKG", "PKG package ..."),
    (
        Keyword::Copy,
        "COPY",
        "COPY [--from=stage] [--chown=user[:group]] [--chmod=0644] [--link] [--parents] [--exclude=pattern]... source... dest",
    ),
    (
        Keyword::Add,
        "ADD",
        "ADD [--chown=user[:group]] [--chmod=0644] [--link] [--checksum=sha256:hex] [--keep-git-dir] [--exclude=pattern]... source... dest",
    ),
    (
        Keyword::Sysrc,
        "SYSRC",
        "SYSRC [-f file] name=value (or name+=value, name-=value)",
    ),
    (Keyword::Service, "SERVICE", "SERVICE name enable|disable"),
    (
        Keyword::LineInFile,
        "LINE_IN_FILE",
        "LINE_IN_FILE \"line\" file",
    ),
    (Keyword::Render, "RENDER", "RENDER path"),
    (Keyword::Include, "INCLUDE", "INCLUDE path"),
    (Keyword::Jail, "JAIL", "JAIL name[=value] ..."),
    (Keyword::User, "USER", "USER user[:group]"),
    (Keyword::Workdir, "WORKDIR", "WORKDIR path"),
    (
        Keyword::Expose,
        "EXPOSE",
        "EXPOSE port[/tcp|/udp|/sctp] ...",
    ),
    (
        Keyword::Volume,
        "VOLUME",
        "VOLUME path ... (or VOLUME [\"path\", ...])",
    ),
    (
        Keyword::Cmd,
        "CMD",
        "CMD command (or CMD [\"executable\", \"arg\", ...])",
    ),
    (
        Keyword::Entrypoint,
        "ENTRYPOINT",
        "ENTRYPOINT command (or ENTRYPOINT [\"executable\", \"arg\", ...])",
    ),
    (Keyword::StopSignal, "STOPSIGNAL", "STOPSIGNAL signal (e.g. SIGINT or 2)"),
    (
        Keyword::Healthcheck,
        "HEALTHCHECK",
        "HEALTHCHECK [--interval=30s] [--timeout=30s] [--start-period=0s] [--start-interval=5s] [--retries=3] CMD command (or HEALTHCHECK NONE)",
    ),
    (Keyword::Onbuild, "ONBUILD", "ONBUILD instruction arguments"),
    (
        Keyword::Shell,
        "SHELL",
        "SHELL [\"executable\", \"parameters\", ...]",
    ),
    (Keyword::Maintainer, "MAINTAINER", "MAINTAINER name"),
];

/// Dockerfile instructions jbuild deliberately lacks, and what to do instead.
pub(crate) const UNSUPPORTED: &[(&str, &str)] = &[];

impl Keyword {
    /// The keyword for `word` (any case); `LIF` is LINE_IN_FILE.
    pub fn lookup(word: &str) -> Option<Keyword> {
        let upper = word.to_ascii_uppercase();
        if upper == "LIF" {
            return Some(Keyword::LineInFile);
        }
        KEYWORDS
            .iter()
            .find(|(_, name, _)| *name == upper)
            .map(|&(k, _, _)| k)
    }

    pub fn name(self) -> &'static str {
        KEYWORDS
            .iter()
            .find(|(k, _, _)| *k == self)
            .map_or("", |&(_, n, _)| n)
    }

    pub fn usage(self) -> &'static str {
        KEYWORDS
            .iter()
            .find(|(k, _, _)| *k == self)
            .map_or("", |&(_, _, u)| u)
    }

    /// Whether jbuild substitutes variables in the arguments (RUN, CMD and
    /// ENTRYPOINT leave that to the shell).
    pub fn substitutes(self) -> bool {
        !matches!(
            self,
            Keyword::Run
                | Keyword::Cmd
                | Keyword::Entrypoint
                | Keyword::Healthcheck
                | Keyword::Onbuild
                | Keyword::Shell
                | Keyword::Maintainer
        )
    }
}

/// One parsed instruction.
#[derive(Debug, Clone)]
pub(crate) struct Instruction {
    pub keyword: Keyword,
    /// The keyword as written, for its position.
    pub keyword_text: Text,
    /// All arguments as written (continuations joined).
    pub args: Text,
    pub heredocs: Vec<Heredoc>,
    pub escape: char,
    pub body: Body,
}

impl Instruction {
    pub fn span(&self) -> Span {
        self.keyword_text.span()
    }
}

/// A command as written: RUN, CMD and ENTRYPOINT are not substituted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandSrc {
    Shell(String),
    Exec(Vec<String>),
}

/// A COPY source: a path (or glob), or the heredoc with this index.
#[derive(Debug, Clone)]
pub(crate) enum SourceSrc {
    Path(Text),
    Heredoc(usize),
}

#[derive(Debug, Clone)]
pub(crate) struct CopySrc {
    pub from: Option<Text>,
    pub chown: Option<Text>,
    pub chmod: Option<Text>,
    /// `--parents`: keep each source's parent directories.
    pub parents: bool,
    /// `--exclude=PATTERN`, each as written.
    pub exclude: Vec<Text>,
    /// ADD's `--checksum=sha256:...` (never set for COPY).
    pub checksum: Option<Text>,
    /// ADD's `--keep-git-dir` (never set for COPY).
    pub keep_git_dir: bool,
    pub sources: Vec<SourceSrc>,
    pub dest: Text,
}

/// The arguments of each instruction, split but not substituted.
#[derive(Debug, Clone)]
pub(crate) enum Body {
    From {
        platform: Option<Text>,
        image: Text,
        alias: Option<Text>,
    },
    /// Name and optional default.
    Arg(Vec<(Text, Option<Text>)>),
    Env(Vec<(Text, Text)>),
    Label(Vec<(Text, Text)>),
    Run {
        network: bool,
        /// Each `--mount=` value as written, split and checked by the
        /// resolver (its values may use variables).
        mounts: Vec<Text>,
        command: CommandSrc,
    },
    Pkg(Vec<Text>),
    Copy(CopySrc),
    /// ADD: COPY's arguments, plus `--checksum` and `--keep-git-dir`.
    Add(CopySrc),
    Sysrc {
        file: Option<Text>,
        name: Text,
        op: SysrcOp,
        value: Text,
    },
    Service {
        name: Text,
        action: Text,
    },
    LineInFile {
        line: Text,
        file: Text,
    },
    Render(Text),
    Include(Text),
    /// Name and optional value (a bare name is a boolean parameter).
    Jail(Vec<(Text, Option<Text>)>),
    User(Text),
    Workdir(Text),
    Expose(Vec<Text>),
    Volume(Vec<Text>),
    Cmd(CommandSrc),
    Entrypoint(CommandSrc),
    StopSignal(Text),
    /// `None` is `HEALTHCHECK NONE`.
    Healthcheck(Option<HealthSrc>),
    /// The trigger as written after `ONBUILD` (already checked to parse).
    Onbuild(Text),
    Shell(Vec<Text>),
    Maintainer(Text),
}

/// `HEALTHCHECK [flags] CMD command`, the flags as written.
#[derive(Debug, Clone)]
pub(crate) struct HealthSrc {
    pub interval: Option<Text>,
    pub timeout: Option<Text>,
    pub start_period: Option<Text>,
    pub start_interval: Option<Text>,
    pub retries: Option<Text>,
    pub command: CommandSrc,
}
