//! Where Bastille keeps its templates: `bastille_templatesdir` in
//! bastille.conf (`/usr/local/etc/bastille/bastille.conf`), whose default is
//! `${bastille_prefix}/templates`. The file is sh(1) assignments; only the
//! two variables INCLUDE needs are read, with `${bastille_prefix}` replaced
//! the way Bastille's own `. bastille.conf` would.

use std::path::{Path, PathBuf};

use super::source::{substitute, unquote};

/// Where Bastille's configuration file is.
pub const BASTILLE_CONF: &str = "/usr/local/etc/bastille/bastille.conf";

/// Bastille's default prefix (`bastille_prefix`).
pub const DEFAULT_PREFIX: &str = "/usr/local/bastille";

/// The templates directory bastille.conf at `conf` names: its
/// `bastille_templatesdir`, else `${bastille_prefix}/templates`, else
/// Bastille's default. A missing or unreadable file gives the default.
pub fn templates_dir(conf: &Path) -> PathBuf {
    let text = std::fs::read_to_string(conf).unwrap_or_default();
    let mut prefix = DEFAULT_PREFIX.to_string();
    let mut templates: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        // A trailing `# comment` after the value, as bastille.conf.sample has.
        let value = match value.find(" #").or_else(|| value.find("\t#")) {
            Some(at) => &value[..at],
            None => value,
        };
        let value = unquote(value.trim());
        let value = substitute(&value, &|n| {
            (n == "bastille_prefix").then(|| prefix.clone())
        });
        match name.trim() {
            "bastille_prefix" => prefix = value,
            "bastille_templatesdir" => templates = Some(value),
            _ => {}
        }
    }
    PathBuf::from(templates.unwrap_or_else(|| format!("{prefix}/templates")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_of(text: &str) -> PathBuf {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bastille.conf");
        std::fs::write(&p, text).unwrap();
        templates_dir(&p)
    }

    #[test]
    fn templatesdir_follows_the_prefix_as_bastille_reads_it() {
        assert_eq!(
            dir_of("## default paths\nbastille_prefix=\"/tank/bastille\"   ## default: \"/usr/local/bastille\"\nbastille_templatesdir=\"${bastille_prefix}/templates\"  ## default\n"),
            PathBuf::from("/tank/bastille/templates")
        );
        assert_eq!(
            dir_of("bastille_prefix=/b\n"),
            PathBuf::from("/b/templates")
        );
        assert_eq!(
            dir_of("bastille_prefix=/b\nbastille_templatesdir='/srv/tpl'\n"),
            PathBuf::from("/srv/tpl")
        );
        assert_eq!(
            templates_dir(Path::new("/nonexistent/bastille.conf")),
            PathBuf::from("/usr/local/bastille/templates")
        );
    }
}
