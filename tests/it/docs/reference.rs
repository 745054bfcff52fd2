//! What a new user finds without reading the source: shell completions,
//! man pages, the command reference (`docs/cli.md`), the configuration
//! reference (`docs/config.md`) and its ENVIRONMENT section, `jbuild info`'s
//! configuration search, `--version`.

use crate::support::common;

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

use common::*;
use jbuild::config::environment::{self, VARIABLES};
use jbuild::config::Settings;

const REFRESH: &str = "cargo run -q -- man --markdown > docs/cli.md";

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
fn docs_cli_md_is_what_the_cli_says() {
    let t = tempfile::tempdir().unwrap();
    let made = ok(jbuild(t.path()).args(["man", "--markdown"]));
    let committed = fs::read_to_string(repo("docs/cli.md")).unwrap();
    if made != committed {
        let first = made
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| made.lines().count().min(committed.lines().count()));
        panic!(
            "docs/cli.md is stale (first difference at line {}: generated `{}`, committed `{}`); \
             refresh it with: {REFRESH}",
            first + 1,
            made.lines().nth(first).unwrap_or("<end>"),
            committed.lines().nth(first).unwrap_or("<end>"),
        );
    }
    // Every command of `jbuild --help` has its section.
    let help = ok(jbuild(t.path()).arg("--help"));
    let commands = commands_of(&help);
    assert!(commands.len() >= 20, "{commands:?}");
    for c in &commands {
        assert!(
            made.contains(&format!("\n## jbuild {c}\n")),
            "no section for {c}"
        );
    }
}

/// The command names `--help` lists under `Commands:`.
fn commands_of(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's line is indented by two; deeper lines continue the
        // description above them.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_generated_documents_do_not_depend_on_the_environment() {
    let t = tempfile::tempdir().unwrap();
    let a = ok(jbuild(t.path()).args(["man", "--markdown"]));
    let b = ok(jbuild(t.path())
        .args(["man", "--markdown"])
        .env("JBUILD_ROOT", "/somewhere/else")
        .env("JBUILD_BACKEND", "dir")
        .env("COLUMNS", "40"));
    assert_eq!(a, b);
    let page = ok(jbuild(t.path()).arg("man"));
    assert!(page.contains("\n.TH jbuild 1 "), "{page}");
    assert!(!page.contains(&t.path().display().to_string()));
}

#[test]
fn man_renders_every_page() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("share/man/man1");
    ok(jbuild(t.path()).args(["man", "--out"]).arg(&dir));
    // A place that cannot be a directory is the user's mistake, named.
    let file = t.path().join("a-file");
    fs::write(&file, "").unwrap();
    let out = run(jbuild(t.path())
        .args(["man", "--out"])
        .arg(file.join("man1")));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot write man pages into") && err.contains("a-file"),
        "{err}"
    );
    let help = ok(jbuild(t.path()).arg("--help"));
    let mut expected: BTreeSet<String> = commands_of(&help)
        .iter()
        .map(|c| format!("jbuild-{c}.1"))
        .collect();
    expected.insert("jbuild.1".into());
    // Commands of their own: one page each too.
    for group in ["manifest", "system"] {
        let help = ok(jbuild(t.path()).args([group, "--help"]));
        for c in commands_of(&help) {
            expected.insert(format!("jbuild-{group}-{c}.1"));
        }
    }
    let written: BTreeSet<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(written, expected, "one page per command");
    for page in &written {
        let out = Command::new("man")
            .arg("-l")
            .arg(dir.join(page))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .expect("run man");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && err.is_empty(),
            "man -l {page}: {err}"
        );
        let text = plain(&String::from_utf8_lossy(&out.stdout));
        assert!(text.contains("SYNOPSIS"), "{page}:\n{text}");
        if page == "jbuild.1" {
            // One ENVIRONMENT section listing every variable.
            let env = text.split("ENVIRONMENT").nth(1).expect("ENVIRONMENT");
            for name in environment::names() {
                assert!(env.contains(name), "{name} missing from jbuild(1):\n{env}");
            }
            assert!(text.contains("/usr/local/etc/jbuild/config.toml"));
            assert!(text.contains("GLOBAL OPTIONS"), "{text}");
        } else {
            assert!(text.contains("jbuild(1)"), "{page}: SEE ALSO");
        }
    }
}

/// man's output without the overstrikes (`X\bX`) that make bold and
/// underline on a terminal.
fn plain(text: &str) -> String {
    let mut s = String::new();
    for c in text.chars() {
        if c == '\u{8}' {
            s.pop();
        } else {
            s.push(c);
        }
    }
    s
}

#[test]
fn bash_completion_loads_and_completes() {
    let t = tempfile::tempdir().unwrap();
    let script = t.path().join("jbuild.bash");
    fs::write(&script, ok(jbuild(t.path()).args(["completion", "bash"]))).unwrap();
    let complete = |words: &str, cword: usize| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {} && complete -p jbuild && COMP_WORDS=({words}) && COMP_CWORD={cword} \
                 && COMP_LINE='{words}' && COMP_POINT=${{#COMP_LINE}} \
                 && _jbuild jbuild \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\" \
                 && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // A broken configuration file does not stop the documents.
    let broken = t.path().join("broken.toml");
    fs::write(&broken, "[zfs\n").unwrap();
    let again = ok(jbuild(t.path())
        .env("JBUILD_CONFIG", &broken)
        .args(["completion", "bash"]));
    assert_eq!(again, fs::read_to_string(&script).unwrap());
    let out = run(jbuild(t.path()).env("JBUILD_CONFIG", &broken).arg("info"));
    assert_eq!(out.status.code(), Some(1), "while other commands refuse it");

    let out = complete("jbuild bu", 1);
    let mut lines = out.lines();
    assert!(
        lines.next().unwrap().contains(" -F _jbuild jbuild"),
        "{out}"
    );
    let words: Vec<&str> = lines.collect();
    assert_eq!(words, ["build"], "{out}");
    let out = complete("jbuild completion ''", 2);
    for shell in ["bash", "zsh", "fish"] {
        assert!(out.lines().any(|l| l == shell), "{out}");
    }
    let out = complete("jbuild images --j", 2);
    assert!(
        out.lines().any(|l| l == "--json"),
        "global flags complete: {out}"
    );
}

#[test]
fn zsh_and_fish_load_their_scripts() {
    let t = tempfile::tempdir().unwrap();
    let shell = |program: &str, args: &[&str]| {
        let out = Command::new(program)
            .args(args)
            .env("HOME", t.path())
            .output()
            .unwrap_or_else(|e| panic!("run {program} (tests/run installs it): {e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.is_empty(), "{program}: {err}");
        String::from_utf8(out.stdout).unwrap()
    };
    let zsh = t.path().join("_jbuild");
    fs::write(&zsh, ok(jbuild(t.path()).args(["completion", "zsh"]))).unwrap();
    let out = shell(
        "zsh",
        &[
            "-fc",
            &format!(
                "autoload -U compinit && compinit -u -d {}/zcompdump && source {} \
                 && print -r -- ${{_comps[jbuild]}}",
                t.path().display(),
                zsh.display()
            ),
        ],
    );
    assert_eq!(out.trim(), "_jbuild", "zsh registered the completion");

    let fish = t.path().join("jbuild.fish");
    fs::write(&fish, ok(jbuild(t.path()).args(["completion", "fish"]))).unwrap();
    let out = shell(
        "fish",
        &[
            "--no-config",
            "-c",
            &format!(
                "source {} && complete -C 'jbuild bu' && complete -C 'jbuild images --j'",
                fish.display()
            ),
        ],
    );
    let words: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(words, ["build", "--json"], "{out}");

    let out = run(jbuild(t.path()).args(["completion", "tcsh"]));
    assert_eq!(out.status.code(), Some(1), "a usage mistake is the user's");
}

#[test]
fn version_names_the_commit_and_the_target() {
    let t = tempfile::tempdir().unwrap();
    let v = ok(jbuild(t.path()).arg("--version"));
    let v = v.trim();
    assert!(
        v.starts_with(&format!("jbuild {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    // Outside a git checkout (a release tarball) build.rs says `unknown`.
    let commit = match commit {
        Ok(c) if c.status.success() => String::from_utf8(c.stdout).unwrap().trim().to_string(),
        _ => "unknown".to_string(),
    };
    assert!(v.contains(&format!("(commit {commit}, ")), "{v}");
    let arch = std::env::consts::ARCH;
    let os = std::env::consts::OS;
    let target = v
        .split("target ")
        .nth(1)
        .and_then(|r| r.strip_suffix(')'))
        .expect("target");
    assert!(
        target.starts_with(arch) && target.contains(os),
        "{target} is not a {arch} {os} triple"
    );
    let info = ok(jbuild(t.path()).args(["info", "--json"]));
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["version"].as_str().unwrap(), &v["jbuild ".len()..]);
}

#[test]
fn global_options_have_their_own_heading() {
    let t = tempfile::tempdir().unwrap();
    for args in [
        &["--help"][..],
        &["images", "--help"],
        &["manifest", "push", "--help"],
    ] {
        let help = ok(jbuild(t.path()).args(args));
        let global = help
            .split("Global options:")
            .nth(1)
            .unwrap_or_else(|| panic!("no Global options heading in {args:?}:\n{help}"));
        for flag in ["--root", "--backend", "--quiet", "--json", "--debug"] {
            assert!(global.contains(flag), "{flag} not under Global options");
        }
        let before = help.split("Global options:").next().unwrap();
        assert!(!before.contains("--root"), "{args:?}: --root listed twice");
    }
}

#[test]
fn info_lists_the_configuration_files_it_looked_for() {
    let t = tempfile::tempdir().unwrap();
    let xdg = t.path().join("xdg");
    let info = |c: &mut Command| {
        ok(c.env_remove("JBUILD_CONFIG")
            .env("XDG_CONFIG_HOME", &xdg)
            .args(["info", "--json"]))
    };
    let user_file = xdg.join("jbuild/config.toml");
    let v: serde_json::Value = serde_json::from_str(&info(&mut jbuild(t.path()))).unwrap();
    let searched = v["config_searched"].as_array().unwrap();
    let paths: Vec<&str> = searched
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            user_file.to_str().unwrap(),
            "/usr/local/etc/jbuild/config.toml",
            "/etc/jbuild/config.toml"
        ]
    );
    assert_eq!(searched[0]["state"], "not found");

    fs::create_dir_all(user_file.parent().unwrap()).unwrap();
    fs::write(&user_file, "backend = \"dir\"\n").unwrap();
    let v: serde_json::Value = serde_json::from_str(&info(&mut jbuild(t.path()))).unwrap();
    assert_eq!(v["config"], user_file.to_str().unwrap());
    assert_eq!(v["config_searched"][0]["state"], "used");

    // $JBUILD_CONFIG is the one file looked for; the text form says so too.
    let other = t.path().join("other.toml");
    fs::write(&other, "").unwrap();
    let text = ok(jbuild(t.path())
        .env("JBUILD_CONFIG", &other)
        .env("XDG_CONFIG_HOME", &xdg)
        .arg("info"));
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("config_searched"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].ends_with(&format!("{} (used)", other.display())),
        "{text}"
    );
}

/// The keys the settings parser accepts, asked of the parser itself:
/// `deny_unknown_fields` names every field it expected when it refuses one.
fn parser_keys() -> BTreeSet<String> {
    // serde says "expected `a`", "expected `a` or `b`" or
    // "expected one of `a`, `b`, `c`": the names are the quoted words.
    let expected = |doc: &str| -> Vec<String> {
        let e = Settings::parse(doc).expect_err(doc);
        let list = e
            .split("expected ")
            .nth(1)
            .and_then(|l| l.lines().next())
            .unwrap_or_else(|| panic!("no list of fields in: {e}"));
        let names: Vec<String> = list
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect();
        assert!(!names.is_empty(), "no list of fields in: {e}");
        names
    };
    let mut keys = BTreeSet::new();
    for top in expected("no_such_key_anywhere = 1\n") {
        // A section refuses a number for itself, saying it wants a struct.
        let section = Settings::parse(&format!("{top} = 1\n"))
            .err()
            .is_some_and(|e| e.contains("struct"));
        if section {
            for key in expected(&format!("[{top}]\nno_such_key_anywhere = 1\n")) {
                // An array of tables (`[[trust.scope]]`) names its own keys.
                let table = format!("[[{top}.{key}]]\nno_such_key_anywhere = 1\n");
                if Settings::parse(&table)
                    .err()
                    .is_some_and(|e| e.contains("unknown field"))
                {
                    for sub in expected(&table) {
                        keys.insert(format!("{top}.{key}.{sub}"));
                    }
                }
                keys.insert(format!("{top}.{key}"));
            }
        } else {
            keys.insert(top);
        }
    }
    keys
}

/// `section.key` → the default column, from docs/config.md's tables.
fn documented_keys(md: &str) -> std::collections::BTreeMap<String, String> {
    let mut keys = std::collections::BTreeMap::new();
    let mut section: Option<String> = None;
    let mut in_keys = false;
    for line in md.lines() {
        if line.starts_with("## ") {
            in_keys = line == "## Every key";
            continue;
        }
        if !in_keys {
            continue;
        }
        if let Some(h) = line.strip_prefix("### ") {
            // `[section]`, or `[[section.array]]` for an array of tables.
            section = h
                .strip_prefix("`[[")
                .and_then(|s| s.strip_suffix("]]`"))
                .or_else(|| h.strip_prefix("`[").and_then(|s| s.strip_suffix("]`")))
                .map(str::to_string);
            continue;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        if let Some(key) = cells[0]
            .strip_prefix("| `")
            .and_then(|k| k.strip_suffix('`'))
        {
            let name = match &section {
                Some(s) => format!("{s}.{key}"),
                None => key.to_string(),
            };
            keys.insert(name, cells.get(1).unwrap_or(&"").to_string());
        }
    }
    keys
}

#[test]
fn docs_config_md_covers_every_key_the_parser_accepts() {
    let md = fs::read_to_string(repo("docs/config.md")).unwrap();
    let accepted = parser_keys();
    assert!(accepted.len() >= 15, "{accepted:?}");
    assert!(accepted.contains("layers.max_path") && accepted.contains("backend"));
    let documented = documented_keys(&md);
    let names: BTreeSet<String> = documented.keys().cloned().collect();
    let missing: Vec<_> = accepted.difference(&names).collect();
    let unknown: Vec<_> = names.difference(&accepted).collect();
    assert!(
        missing.is_empty(),
        "keys the parser accepts that docs/config.md does not document: {missing:?}"
    );
    assert!(
        unknown.is_empty(),
        "keys docs/config.md documents that the parser refuses: {unknown:?}"
    );

    // The example is a file the parser accepts, every section in it.
    let example = md
        .split("```toml\n")
        .nth(1)
        .and_then(|r| r.split("```").next())
        .expect("a ```toml example");
    let s = Settings::parse(example).unwrap_or_else(|e| panic!("the example: {e}"));
    assert_eq!(s.zfs.dataset.as_deref(), Some("zroot/jbuild"));

    // The defaults stated are the code's.
    let limits = jbuild::layer::Limits::default();
    let stated = |key: &str| documented[key].replace('`', "");
    for (key, value) in [
        ("layers.max_size", limits.max_size.to_string()),
        ("layers.max_entries", limits.max_entries.to_string()),
        ("layers.max_header", limits.max_header.to_string()),
        ("layers.max_path", limits.max_path.to_string()),
        (
            "registries.timeout_secs",
            jbuild::config::DEFAULT_REGISTRY_TIMEOUT_SECS.to_string(),
        ),
        (
            "registries.min_rate",
            jbuild::config::DEFAULT_MIN_RATE.to_string(),
        ),
        (
            "registries.rate_window_secs",
            jbuild::config::DEFAULT_RATE_WINDOW_SECS.to_string(),
        ),
        (
            "registries.blob_deadline_secs",
            jbuild::config::DEFAULT_BLOB_DEADLINE_SECS.to_string(),
        ),
        (
            "registries.keep_partial_mib",
            jbuild::config::DEFAULT_KEEP_PARTIAL_MIB.to_string(),
        ),
        (
            "registries.keep_partial_hours",
            jbuild::config::DEFAULT_KEEP_PARTIAL_HOURS.to_string(),
        ),
        (
            "freebsd.mirror",
            format!("\"{}\"", jbuild::release::DEFAULT_MIRROR),
        ),
        (
            "freebsd.manifests_dir",
            jbuild::release::DEFAULT_MANIFESTS.to_string(),
        ),
        (
            "freebsd.pkgbase_url",
            format!("\"{}\"", jbuild::release::pkgbase::DEFAULT_PKGBASE_URL),
        ),
        (
            "freebsd.pkgbase_sets",
            format!("[\"{}\"]", jbuild::release::pkgbase::DEFAULT_SET),
        ),
        (
            "freebsd.pkg_keys_dir",
            jbuild::release::pkgbase::DEFAULT_KEYS_DIR.to_string(),
        ),
        (
            "freebsd.base",
            format!("\"{:?}\"", jbuild::config::FreeBsdBase::default()).to_lowercase(),
        ),
        (
            "bastille.templates_dir",
            jbuild::bastille::DEFAULT_TEMPLATES_DIR.to_string(),
        ),
        (
            "registries.certs_dir",
            jbuild::transport::registry::DEFAULT_CERTS_DIRS.join(", then "),
        ),
    ] {
        assert!(
            stated(key).split(" (").next() == Some(value.as_str()),
            "docs/config.md says {key} defaults to {}, the code to {value}",
            stated(key)
        );
    }
    let d = Settings::default();
    assert!(!d.layers.allow_setuid && stated("layers.allow_setuid") == "false");
    assert!(!d.layers.allow_devices && stated("layers.allow_devices") == "false");
    assert!(!d.pkg.offline && stated("pkg.offline") == "false");
    assert!(d.registries.insecure.is_empty() && stated("registries.insecure") == "[]");
    assert!(d.zfs.dataset.is_none() && stated("zfs.dataset") == "unset");
}

/// Every environment variable the code reads by name (outside tests):
/// `env::var("X")`, `var_os("X")`, clap's `env = "X"`, the keychain's
/// `non_empty(&var, "X")` and `var("X")` lookups, and any `JBUILD_*` name.
fn variables_read(dir: &Path, found: &mut BTreeSet<(String, String)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            variables_read(&path, found);
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs")
            || path.file_name().is_some_and(|n| n == "tests.rs")
        {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        // Unit tests at the end of a file set variables of their own.
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (i, _) in code.match_indices('"') {
            let rest = &code[i + 1..];
            let Some(end) = rest.find('"') else { break };
            let name = &rest[..end];
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                || !name.starts_with(|c: char| c.is_ascii_uppercase())
            {
                continue;
            }
            let before = code[..i].trim_end();
            let read = ["var(", "var_os(", "env =", "non_empty(&var,", "text("]
                .iter()
                .any(|p| before.ends_with(p));
            // `env!` is the build's environment (build.rs), not the user's.
            if before.ends_with("env!(") {
                continue;
            }
            if read || name.starts_with("JBUILD_") {
                found.insert((name.to_string(), path.display().to_string()));
            }
        }
    }
}

#[test]
fn every_variable_the_code_reads_is_documented_once_for_all() {
    let mut read = BTreeSet::new();
    variables_read(&repo("src"), &mut read);
    let names: Vec<(String, String)> = read.into_iter().collect();
    for must in [
        "JBUILD_ROOT",
        "JBUILD_CONFIG",
        "SOURCE_DATE_EPOCH",
        "RUST_LOG",
        "DOCKER_CONFIG",
    ] {
        assert!(
            names.iter().any(|(n, _)| n == must),
            "the scan misses {must}: {names:?}"
        );
    }
    let listed: BTreeSet<&str> = environment::names().collect();
    for (name, file) in &names {
        assert!(
            listed.contains(name.as_str()),
            "{file} reads ${name}, which src/config/environment.rs (and so jbuild(1) and \
             docs/config.md) does not list"
        );
    }
    let md = fs::read_to_string(repo("docs/config.md")).unwrap();
    let section = md.split("## Environment").nth(1).expect("## Environment");
    for v in VARIABLES {
        let row = v
            .name
            .split(", ")
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            section.contains(&format!("| {row} |")),
            "docs/config.md's Environment has no row for {}",
            v.name
        );
    }
    for proxy in ["HTTP_PROXY", "https_proxy", "NO_PROXY", "ALL_PROXY"] {
        assert!(listed.contains(proxy), "{proxy}");
    }
}

/// Where a command takes a stored image, bash, zsh and fish complete the
/// store's names, asking `jbuild images --format` as podman's
/// completions ask podman.
#[test]
fn image_names_complete_in_bash_zsh_and_fish() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("a"), "a\n").unwrap();
    fs::write(ctx.join("Jailfile"), "FROM scratch\nCOPY a /a\n").unwrap();
    ok(jbuild(&root).args(["build", "-q", "-t", "web:1"]).arg(&ctx));
    let bin = Path::new(env!("CARGO_BIN_EXE_jbuild")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let shell = |program: &str, args: &[&str]| {
        let out = Command::new(program)
            .args(args)
            .env("HOME", t.path())
            .env("PATH", &path)
            .env("JBUILD_ROOT", &root)
            .env("JBUILD_BACKEND", "dir")
            .output()
            .unwrap_or_else(|e| panic!("run {program} (tests/run installs it): {e}"));
        assert!(
            out.status.success(),
            "{program}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let script = |name: &str, sh: &str| {
        let p = t.path().join(name);
        fs::write(&p, ok(jbuild(t.path()).args(["completion", sh]))).unwrap();
        p.display().to_string()
    };

    let bash = script("jbuild.bash", "bash");
    for (words, cword) in [
        ("jbuild inspect w", 2),
        ("jbuild diff web:1 ''", 3),
        ("jbuild run --rm ''", 3),
    ] {
        let out = shell(
            "bash",
            &[
                "-c",
                &format!(
                    "source {bash} && COMP_WORDS=({words}) && COMP_CWORD={cword} \
                     && _jbuild jbuild \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\" \
                     && printf '%s\\n' \"${{COMPREPLY[@]}}\""
                ),
            ],
        );
        assert!(out.lines().any(|l| l == "web:1"), "bash, {words}: {out}");
    }

    let zsh = script("_jbuild", "zsh");
    let out = shell(
        "zsh",
        &[
            "-fc",
            &format!(
                "autoload -U compinit && compinit -u -d {}/zcompdump && source {zsh} \
                 && _jbuild_image_names",
                t.path().display()
            ),
        ],
    );
    assert_eq!(out.trim(), "web:1", "zsh");
    let text = fs::read_to_string(&zsh).unwrap();
    assert!(
        text.contains("':image -- Image name, digest or digest prefix:_jbuild_images'"),
        "zsh: inspect's IMAGE completes with _jbuild_images"
    );

    let fish = script("jbuild.fish", "fish");
    for line in ["jbuild inspect ", "jbuild rmi ", "jbuild save -o x "] {
        let out = shell(
            "fish",
            &[
                "--no-config",
                "-c",
                &format!("source {fish} && complete -C '{line}'"),
            ],
        );
        assert!(
            out.lines().any(|l| l.split('\t').next() == Some("web:1")),
            "fish, {line}: {out}"
        );
    }
}
