//! The Jailfile parser and resolver on arbitrary text.
//!
//! Properties: `load_str` returns (Ok or a diagnostic, never a panic); the
//! same text gives the same result twice; a diagnostic about the Jailfile
//! itself points at a line that exists and renders; a build that resolves
//! has at least one stage.
//!
//! INCLUDE reads files relative to the Jailfile's directory, a private temp
//! dir holding `inc` (an instruction) and `loop` (which includes itself).
//! An input that says INCLUDE and has a `/` anywhere is skipped, so no
//! include can name a file outside that dir (`/dev/zero`, `/etc/passwd`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The private directory the Jailfile's INCLUDEs read: made once per
/// process and never removed by it (a static is not dropped), so a caller
/// that ends (the corpus replay) removes it.
pub fn include_dir() -> &'static std::path::Path {
    jailfile()
        .parent()
        .expect("the Jailfile is in the include dir")
}

fn jailfile() -> &'static PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = DIR.get_or_init(|| tempfile::tempdir().expect("temp dir"));
        std::fs::write(dir.path().join("inc"), "ARG INC=1\nRUN echo included\n").unwrap();
        std::fs::write(dir.path().join("loop"), "INCLUDE loop\n").unwrap();
        dir.path().join("Jailfile")
    })
}

/// The target's property checks on one input (see the module docs).
pub fn check_jailfile_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains('/') && text.to_ascii_lowercase().contains("include") {
        return;
    }
    let path = jailfile();
    let mut args = BTreeMap::new();
    args.insert("FUZZ".to_string(), "value".to_string());
    let first = jbuild::jailfile::load_str(path, text, &args);
    let second = jbuild::jailfile::load_str(path, text, &args);
    assert_eq!(first, second, "the same text resolved differently twice");
    match first {
        Ok(build) => assert!(!build.stages.is_empty(), "a build with no stage"),
        Err(d) => {
            let rendered = d.to_string();
            assert!(!d.message.is_empty(), "an empty diagnostic: {rendered}");
            if &d.file == path && d.line > 0 {
                let lines = text.matches(['\n', '\r']).count() as u32 + 1;
                assert!(
                    d.line <= lines,
                    "diagnostic on line {} of a {lines}-line text: {rendered}",
                    d.line
                );
            }
        }
    }
}
