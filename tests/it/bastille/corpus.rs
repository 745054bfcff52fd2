//! The corpus under tests/data/bastille/corpus: templates written the way the
//! BastilleBSD/templates repository writes them. Every one converts and
//! plans, and its printed Jailfile takes `--build-arg`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::{arg_file, layer_keys, templates};
use crate::support::common::{jbuild, ok, repo};
use jbuild::bastille::{self, Options};
use jbuild::jailfile;

/// The corpus: templates written the way the BastilleBSD/templates
/// repository writes them, `corpus/<category>/<name>/Bastillefile`.
fn corpus() -> Vec<PathBuf> {
    let root = templates().join("corpus");
    let mut out = Vec::new();
    for cat in fs::read_dir(&root).unwrap() {
        for t in fs::read_dir(cat.unwrap().path()).unwrap() {
            let t = t.unwrap().path();
            assert!(t.join("Bastillefile").is_file(), "{}", t.display());
            out.push(t);
        }
    }
    out.sort();
    out
}

/// `NAME=VALUE` lines of a template's args.env, as --build-arg values.
fn build_args(dir: &Path) -> BTreeMap<String, String> {
    let text = arg_file(dir)
        .map(|p| fs::read_to_string(p).unwrap())
        .unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_corpus_converts_and_plans_and_its_printed_jailfiles_take_build_args() {
    let list = corpus();
    assert!(list.len() >= 30, "{} templates", list.len());
    // docs/bastille.md states the figure.
    let doc = fs::read_to_string(repo().join("docs/bastille.md")).unwrap();
    let said = format!("holds {} templates", list.len());
    assert!(
        doc.contains(&said),
        "docs/bastille.md does not say `{said}`"
    );
    let all: String = list
        .iter()
        .map(|d| fs::read_to_string(d.join("Bastillefile")).unwrap())
        .collect();
    for hook in [
        "\nINCLUDE ",
        "\nCONFIG set ",
        "\nRESTART",
        "\nSERVICE postgresql initdb",
        " configtest",
        "\nCMD ",
        "\nMOUNT ",
        "\nRDR ",
        "\nLIMITS ",
        "\nARG+ ",
        "\nARG ",
        "\nPKG ",
        "\nSYSRC ",
        "\nCP ",
        "\nOVERLAY ",
        "\nRENDER ",
        "\nLINE_IN_FILE ",
        "\nTAGS ",
    ] {
        assert!(all.contains(hook), "no `{}` in the corpus", hook.trim());
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut across = 0;
    for dir in &list {
        let name = dir.strip_prefix(templates()).unwrap().display().to_string();
        // Built directly, with the template's values given as --arg-file.
        let direct = |extra: &BTreeMap<String, String>| {
            let opts = Options {
                from: "freebsd:14.3-RELEASE".into(),
                arg_file: arg_file(dir),
                args: extra.clone(),
                ..Default::default()
            };
            let c = bastille::convert(dir, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let b = c
                .load()
                .unwrap_or_else(|e| panic!("{name}: {e}\n{}", c.jailfile));
            (layer_keys(&b, &c.context), c)
        };
        let (keys, c) = direct(&BTreeMap::new());
        assert!(!keys.is_empty(), "{name}: no layer steps");
        // Only a template that INCLUDEs another category has the corpus
        // root as its build context.
        if c.context == templates().join("corpus").canonicalize().unwrap() {
            across += 1;
        }

        // `jbuild convert` with no values: the ARGs stay ARGs, and the
        // template's values as --build-arg plan to the same keys.
        let out = tmp.path().join(name.replace('/', "_"));
        ok(jbuild(&tmp.path().join("state"))
            .args(["convert", "--from", "freebsd:14.3-RELEASE", "-o"])
            .arg(&out)
            .arg(dir));
        let mut args = build_args(dir);
        let printed = jailfile::load(&out, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(layer_keys(&printed, &c.context), keys, "{name}");

        // Another value for the template's first ARG: --arg on the
        // template and --build-arg on the printed Jailfile agree.
        let text = fs::read_to_string(dir.join("Bastillefile")).unwrap();
        let Some((arg, default)) = text
            .lines()
            .find_map(|l| l.strip_prefix("ARG ")?.split_once('='))
        else {
            continue;
        };
        let other = if default.chars().all(|c| c.is_ascii_digit()) {
            "4242"
        } else {
            "changed.example"
        };
        let mut extra = BTreeMap::new();
        extra.insert(arg.to_string(), other.to_string());
        let (changed, _) = direct(&extra);
        assert_ne!(changed, keys, "{name}: ARG {arg} changes nothing");
        args.insert(arg.to_string(), other.to_string());
        let printed = jailfile::load(&out, &args).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            layer_keys(&printed, &c.context),
            changed,
            "{name}: ARG {arg}"
        );
        let jf = fs::read_to_string(&out).unwrap();
        let reference = format!("${{{arg}}}");
        assert_eq!(
            jf.contains(&reference),
            text.contains(&reference),
            "{name}: {reference} not kept in\n{jf}"
        );
    }
    assert!(across >= 5, "{across} templates INCLUDE across categories");
}
