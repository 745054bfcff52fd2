//! `jbuild completion` and `jbuild man`: shell completions, man pages and
//! the Markdown command reference (`docs/cli.md`), all made from the one
//! clap definition in `cli/mod.rs`, so they cannot drift from the flags.

use std::path::PathBuf;

use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::Shell;
use clap_mangen::roff::{bold, roman, Roff};
use clap_mangen::Man;

use jbuild::config::environment::VARIABLES;

use super::{Cli, CmdResult, Ctx, Failure};

#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: ShellName,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum ShellName {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write every page (jbuild.1 and one jbuild-COMMAND.1 per command)
    /// into DIR (made if missing), e.g. /usr/local/share/man/man1. Without
    /// it, jbuild(1) is printed.
    #[arg(long, value_name = "DIR", conflicts_with = "markdown")]
    out: Option<PathBuf>,
    /// Print the command reference in Markdown instead (docs/cli.md).
    #[arg(long)]
    markdown: bool,
}

/// The width help text is wrapped at in generated documents, whatever the
/// terminal they are made on.
const WIDTH: usize = 100;

pub fn completion(_ctx: &Ctx, args: CompletionArgs) -> CmdResult {
    let shell = match args.shell {
        ShellName::Bash => Shell::Bash,
        ShellName::Zsh => Shell::Zsh,
        ShellName::Fish => Shell::Fish,
    };
    let mut text = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "jbuild", &mut text);
    let text = with_image_names(args.shell, &String::from_utf8_lossy(&text));
    out!("{text}");
    Ok(())
}

/// The stored images' names as completions print them (`jbuild images
/// --format`, untagged ones left out), as podman's completions ask podman.
const IMAGE_NAMES: &str =
    "jbuild images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep -v '<none>'";

/// Commands whose image arguments have other names: `diff A B`, `tag
/// SOURCE TARGET`, `rmi NAMES...`.
const OTHER_IMAGE_ARGS: &[(&str, &str)] = &[
    ("diff", "a"),
    ("diff", "b"),
    ("tag", "source"),
    ("rmi", "names"),
];

/// The commands whose positional argument `image` (or `images`) names a
/// stored image, and those of [`OTHER_IMAGE_ARGS`].
fn image_commands() -> Vec<String> {
    let mut named: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|c| {
            c.get_positionals()
                .any(|a| matches!(a.get_id().as_str(), "image" | "images"))
        })
        .map(|c| c.get_name().to_string())
        .collect();
    for (c, _) in OTHER_IMAGE_ARGS {
        if !named.iter().any(|n| n == c) {
            named.push(c.to_string());
        }
    }
    named
}

/// clap's script, with the stored images' names completed where a
/// command takes an image (clap's generators know only fixed values).
fn with_image_names(shell: ShellName, script: &str) -> String {
    let commands = image_commands();
    match shell {
        ShellName::Bash => {
            let script = script.replacen("_jbuild() {", "_jbuild_clap() {", 1);
            format!(
                "{script}\n_jbuild_image_names() {{\n    {IMAGE_NAMES}\n}}\n\n\
                 _jbuild() {{\n    _jbuild_clap \"$@\"\n    local cur=\"${{COMP_WORDS[COMP_CWORD]}}\" sub=\"\" w\n    \
                 for w in \"${{COMP_WORDS[@]:1:COMP_CWORD-1}}\"; do\n        \
                 case \"$w\" in -*) ;; *) sub=\"$w\"; break ;; esac\n    done\n    \
                 case \"$sub\" in\n        {})\n            \
                 [[ \"$cur\" == -* ]] || COMPREPLY+=( $(compgen -W \"$(_jbuild_image_names)\" -- \"$cur\") ) ;;\n    \
                 esac\n}}\n",
                commands.join("|")
            )
        }
        ShellName::Zsh => {
            let mut out = String::new();
            let mut command = "";
            for line in script.lines() {
                // clap writes each command's arguments under `(NAME)`.
                if let Some(c) = line.strip_prefix('(').and_then(|l| l.strip_suffix(')')) {
                    command = c;
                }
                let other = OTHER_IMAGE_ARGS.iter().any(|(c, id)| {
                    *c == command
                        && (line.starts_with(&format!("':{id} -- "))
                            || line.starts_with(&format!("'*::{id} -- ")))
                });
                let image = other
                    || line.starts_with("':image:")
                    || line.starts_with("':image -- ")
                    || line.starts_with("'*::images");
                match line.strip_suffix(":_default' \\") {
                    Some(head) if image => {
                        out.push_str(head);
                        out.push_str(":_jbuild_images' \\");
                    }
                    _ => out.push_str(line),
                }
                out.push('\n');
            }
            let functions = format!(
                "(( $+functions[_jbuild_image_names] )) ||\n_jbuild_image_names() {{\n    {IMAGE_NAMES}\n}}\n\n\
                 (( $+functions[_jbuild_images] )) ||\n_jbuild_images() {{\n    local -a names\n    \
                 names=(${{(f)\"$(_jbuild_image_names)\"}})\n    compadd -a names\n}}\n\n"
            );
            let at = out
                .find("if [ \"$funcstack[1]\" = \"_jbuild\" ]")
                .unwrap_or(out.len());
            out.insert_str(at, &functions);
            out
        }
        ShellName::Fish => {
            let mut out = script.to_string();
            for c in &commands {
                out.push_str(&format!(
                    "complete -c jbuild -n \"__fish_jbuild_using_subcommand {c}\" -f -a \"({})\"\n",
                    IMAGE_NAMES.replace("grep -v '<none>'", "string match -v '*<none>*'")
                ));
            }
            out
        }
    }
}

pub fn man(ctx: &Ctx, args: ManArgs) -> CmdResult {
    if args.markdown {
        out!("{}", markdown());
        return Ok(());
    }
    let Some(dir) = args.out else {
        let text = page(&command(), true).map_err(Failure::internal)?;
        out!("{}", String::from_utf8_lossy(&text));
        return Ok(());
    };
    let written = write_pages(&dir)?;
    if !ctx.quiet {
        outln!("wrote {written} pages into {}", dir.display());
    }
    Ok(())
}

/// The command tree as documents show it: built (so subcommands carry
/// their `jbuild-NAME` display names) and wrapped at a fixed width.
fn command() -> clap::Command {
    // The value a variable has where the document is made is not part of it.
    let mut cmd = Cli::command()
        .disable_help_subcommand(true)
        .term_width(WIDTH)
        .mut_args(|a| a.hide_env_values(true));
    cmd.build();
    cmd
}

/// The commands a reader sees, depth first: `jbuild`, `jbuild build`, ...
fn visible(cmd: &clap::Command) -> Vec<clap::Command> {
    let mut all = vec![cmd.clone()];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        all.extend(visible(sub));
    }
    all
}

/// Each page is a path the user named in effect (DIR/jbuild.1, ...), so it
/// is written as every such path is (fsutil::output): a page that is a
/// symlink stays one, a FIFO is written in place, nothing is replaced by
/// something else.
fn write_pages(dir: &std::path::Path) -> Result<usize, Failure> {
    let cannot = |e: anyhow::Error| {
        Failure::user(e.context(format!(
            "cannot write man pages into {} (is it a directory you may write to?)",
            dir.display()
        )))
    };
    std::fs::create_dir_all(dir).map_err(|e| cannot(e.into()))?;
    let pages = visible(&command());
    for (i, cmd) in pages.iter().enumerate() {
        let man = Man::new(cmd.clone());
        let text = page(cmd, i == 0).map_err(Failure::internal)?;
        jbuild::fsutil::output::write_output(&dir.join(man.get_filename()), &text)
            .map_err(|e| cannot(e.into()))?;
    }
    Ok(pages.len())
}

/// One man page; jbuild(1) also gets ENVIRONMENT, EXIT STATUS, FILES and SEE ALSO.
fn page(cmd: &clap::Command, top: bool) -> std::io::Result<Vec<u8>> {
    let mut text = Vec::new();
    Man::new(cmd.clone()).render(&mut text)?;
    let mut roff = Roff::default();
    if top {
        roff.control("SH", ["ENVIRONMENT"]);
        for v in VARIABLES {
            roff.control("TP", []);
            roff.text([bold(v.name)]);
            roff.text([roman(v.meaning)]);
        }
        roff.control("SH", ["EXIT STATUS"]);
        for (code, meaning) in super::EXIT_CODES {
            roff.control("TP", []);
            roff.text([bold(code.to_string())]);
            roff.text([roman(meaning)]);
        }
        roff.control("SH", ["FILES"]);
        roff.text([roman(
            "The configuration file is $JBUILD_CONFIG when set, else the first of these that \
             exists (jbuild info lists them):",
        )]);
        for f in [
            "$XDG_CONFIG_HOME/jbuild/config.toml (~/.config/jbuild/config.toml)",
            "/usr/local/etc/jbuild/config.toml",
            "/etc/jbuild/config.toml",
        ] {
            roff.control("TP", []);
            roff.text([bold(f)]);
        }
    }
    roff.control("SH", ["SEE ALSO"]);
    let mut see: Vec<String> = if top {
        visible(cmd)
            .iter()
            .skip(1)
            .map(|c| format!("{}(1)", display_name(c)))
            .collect()
    } else {
        vec!["jbuild(1)".into()]
    };
    see.push("skopeo(1)".into());
    roff.text([roman(see.join(", "))]);
    roff.to_writer(&mut text)?;
    Ok(text)
}

/// `jbuild manifest create`: the command as typed (a command's own name
/// may hold `-`, as `generate-key-pair` does).
fn title(cmd: &clap::Command) -> String {
    cmd.get_bin_name()
        .map(str::to_string)
        .unwrap_or_else(|| display_name(cmd).replace('-', " "))
}

fn display_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

/// `docs/cli.md`: every visible command with its whole `--help`.
pub fn markdown() -> String {
    let pages = visible(&command());
    let mut md = String::from(
        "# jbuild command reference\n\n\
         <!-- Generated from the clap definition in src/cli: do not edit.\n     \
         Refresh with: cargo run -q -- man --markdown > docs/cli.md -->\n\n\
         Every command and its flags, as `jbuild COMMAND --help` prints them; the global \
         options, which every command takes, are listed once, under `jbuild`. The \
         environment variables and the configuration file are in [config.md](config.md).\n\n",
    );
    for cmd in &pages {
        let title = title(cmd);
        let anchor = display_name(cmd);
        md.push_str(&format!("- [`{title}`](#{anchor})\n"));
    }
    md.push_str("- [Exit status](#exit-status)\n");
    for cmd in &pages {
        let title = title(cmd);
        let mut c = cmd.clone();
        if !std::ptr::eq(cmd, &pages[0]) {
            // Listed once, under `jbuild`.
            c = c.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a });
        }
        let help = c.render_long_help().to_string();
        let help: Vec<&str> = help.lines().map(str::trim_end).collect();
        md.push_str(&format!(
            "\n<a id=\"{}\"></a>\n\n## {title}\n\n```text\n{}\n```\n",
            display_name(cmd),
            help.join("\n").trim_end()
        ));
    }
    md.push_str(
        "\n<a id=\"exit-status\"></a>\n\n## Exit status\n\n| code | meaning |\n|---|---|\n",
    );
    for (code, meaning) in super::EXIT_CODES {
        md.push_str(&format!("| {code} | {meaning} |\n"));
    }
    md
}
