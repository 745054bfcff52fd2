//! `jbuild images --format`: docker's Go-template-like fields
//! (`{{.Repository}}:{{.Tag}}`), a `table ` prefix for aligned columns
//! under a header, or `json` (one object per image, as docker prints).
//! Only `{{.Field}}` is understood, not the rest of Go's templates; `\t`
//! and `\n` written literally are a tab and a newline, as in docker.

use std::time::SystemTime;

use serde_json::json;

use super::list::{since, ImageRow};
use crate::report::plain::bytes;

/// The fields a template can use, with their table headers.
pub const FIELDS: &[(&str, &str)] = &[
    ("Name", "NAME"),
    ("Repository", "REPOSITORY"),
    ("Tag", "TAG"),
    ("ID", "IMAGE ID"),
    ("Digest", "DIGEST"),
    ("Created", "CREATED"),
    ("CreatedAt", "CREATED AT"),
    ("CreatedSince", "CREATED"),
    ("Size", "SIZE"),
    ("CompressedSize", "COMPRESSED"),
    ("Platform", "PLATFORM"),
];

/// The config fields `jbuild inspect --format` adds (also written
/// `{{.Config.Env}}`, as docker inspect's): lists and maps as JSON, the
/// rest as text; a field the config lacks is empty.
pub const CONFIG_FIELDS: &[&str] = &[
    "Entrypoint",
    "Cmd",
    "Env",
    "WorkingDir",
    "User",
    "Labels",
    "ExposedPorts",
    "Volumes",
    "StopSignal",
    "Os",
    "Architecture",
];

#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("--format: `{{{{.{field}}}}}` is not a field of an image; the fields are {}", FIELDS.iter().map(|(f, _)| format!("{{{{.{f}}}}}")).collect::<Vec<_>>().join(" "))]
    UnknownField { field: String },
    #[error("--format: `{{{{.{field}}}}}` is not a field of an image; the fields are {} {}", FIELDS.iter().map(|(f, _)| format!("{{{{.{f}}}}}")).collect::<Vec<_>>().join(" "), CONFIG_FIELDS.iter().map(|f| format!("{{{{.Config.{f}}}}}")).collect::<Vec<_>>().join(" "))]
    UnknownInspectField { field: String },
    #[error("--format: `{0}` is not closed by `}}}}`")]
    Unclosed(String),
    #[error("--format: `{{{{{0}}}}}`: only fields (`{{{{.Name}}}}`) are understood")]
    NotAField(String),
}

impl crate::blame::Blame for FormatError {
    /// `--format` as the user wrote it.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// A piece of a template: literal text or a field.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Field(&'static str),
}

/// A parsed `--format`.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
    /// Aligned columns (split at tabs) under a header line.
    Table(Vec<Piece>),
    /// One line per image, as written.
    Lines(Vec<Piece>),
    Json,
}

impl Format {
    pub fn parse(text: &str) -> Result<Format, FormatError> {
        if text == "json" {
            return Ok(Format::Json);
        }
        match text.strip_prefix("table") {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => {
                let rest = rest.trim_start();
                let rest = if rest.is_empty() {
                    "{{.Repository}}\t{{.Tag}}\t{{.ID}}\t{{.CreatedSince}}\t{{.Size}}"
                } else {
                    rest
                };
                Ok(Format::Table(pieces(rest, false)?))
            }
            _ => Ok(Format::Lines(pieces(text, false)?)),
        }
    }

    /// `jbuild inspect --format`: one line for one image, with the
    /// fields of `images --format` and [`CONFIG_FIELDS`].
    pub fn parse_inspect(text: &str) -> Result<Vec<Piece>, FormatError> {
        pieces(text, true)
    }

    /// The lines to print for `rows`; `now` for "2 weeks ago", `no_trunc`
    /// for full IDs.
    pub fn render(&self, rows: &[ImageRow], now: SystemTime, no_trunc: bool) -> Vec<String> {
        let value = |r: &ImageRow, f: &str| field(r, f, now, no_trunc);
        match self {
            Format::Json => rows
                .iter()
                .map(|r| {
                    let mut o = serde_json::Map::new();
                    for (f, _) in FIELDS {
                        o.insert(f.to_string(), json!(value(r, f)));
                    }
                    serde_json::Value::Object(o).to_string()
                })
                .collect(),
            Format::Lines(p) => rows.iter().map(|r| fill(p, |f| value(r, f))).collect(),
            Format::Table(p) => {
                let header = fill(p, |f| {
                    FIELDS
                        .iter()
                        .find(|(n, _)| *n == f)
                        .map_or(String::new(), |(_, h)| h.to_string())
                });
                let lines: Vec<String> = std::iter::once(header)
                    .chain(rows.iter().map(|r| fill(p, |f| value(r, f))))
                    .collect();
                align(&lines)
            }
        }
    }
}

fn pieces(text: &str, config: bool) -> Result<Vec<Piece>, FormatError> {
    let text = text.replace("\\t", "\t").replace("\\n", "\n");
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            out.push(Piece::Text(rest[..open].to_string()));
        }
        let after = &rest[open + 2..];
        let close = after
            .find("}}")
            .ok_or_else(|| FormatError::Unclosed(rest[open..].to_string()))?;
        let inner = after[..close].trim();
        let name = inner
            .strip_prefix('.')
            .ok_or_else(|| FormatError::NotAField(inner.to_string()))?;
        let in_config = |n: &str| CONFIG_FIELDS.iter().find(|f| **f == n).copied();
        let known = match (config, name.strip_prefix("Config.")) {
            (true, Some(c)) => in_config(c),
            (true, None) => FIELDS
                .iter()
                .find(|(f, _)| *f == name)
                .map(|(f, _)| *f)
                .or_else(|| in_config(name)),
            (false, _) => FIELDS.iter().find(|(f, _)| *f == name).map(|(f, _)| *f),
        };
        let known = known.ok_or_else(|| {
            let field = name.to_string();
            if config {
                FormatError::UnknownInspectField { field }
            } else {
                FormatError::UnknownField { field }
            }
        })?;
        out.push(Piece::Field(known));
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_string()));
    }
    Ok(out)
}

fn fill(pieces: &[Piece], mut value: impl FnMut(&str) -> String) -> String {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.clone(),
            Piece::Field(f) => value(f),
        })
        .collect()
}

/// Columns split at tabs, each as wide as its widest cell plus 3 (docker's
/// tabwriter padding); the last column is not padded.
fn align(lines: &[String]) -> Vec<String> {
    let cells: Vec<Vec<&str>> = lines.iter().map(|l| l.split('\t').collect()).collect();
    let mut widths = Vec::new();
    for row in &cells {
        for (i, c) in row.iter().enumerate() {
            if widths.len() <= i {
                widths.push(0);
            }
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    cells
        .iter()
        .map(|row| {
            let mut line = String::new();
            for (i, c) in row.iter().enumerate() {
                if i + 1 < row.len() {
                    line.push_str(&format!("{c:<w$}", w = widths[i] + 3));
                } else {
                    line.push_str(c);
                }
            }
            line
        })
        .collect()
}

/// One image's line of `jbuild inspect --format` (`pieces` from
/// [`Format::parse_inspect`]): its row's fields and its config's.
pub fn render_inspect(
    pieces: &[Piece],
    row: &ImageRow,
    state: &super::ImageState,
    now: SystemTime,
) -> String {
    fill(pieces, |f| match CONFIG_FIELDS.contains(&f) {
        true => config_field(state, f),
        false => field(row, f, now, false),
    })
}

/// A config field: lists and maps as JSON, text as it is.
pub fn config_field(s: &super::ImageState, name: &str) -> String {
    let list = |v: &Option<Vec<String>>| json!(v.clone().unwrap_or_default()).to_string();
    match name {
        "Entrypoint" => list(&s.entrypoint),
        "Cmd" => list(&s.cmd),
        "Env" => json!(s
            .env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>())
        .to_string(),
        "WorkingDir" => s.workdir.clone().unwrap_or_default(),
        "User" => s.user.clone().unwrap_or_default(),
        "Labels" => json!(s.labels).to_string(),
        "ExposedPorts" => json!(s.exposed_ports).to_string(),
        "Volumes" => json!(s.volumes).to_string(),
        "StopSignal" => s.stop_signal.clone().unwrap_or_default(),
        "Os" => s.platform.os.clone(),
        "Architecture" => s.platform.architecture.clone(),
        _ => String::new(),
    }
}

/// One field of a row, as docker prints it.
pub fn field(r: &ImageRow, name: &str, now: SystemTime, no_trunc: bool) -> String {
    let unknown = || "N/A".to_string();
    match name {
        "Name" => r.name.to_string(),
        "Repository" => r.repository(),
        "Tag" => r.tag(),
        "ID" if no_trunc => r.digest.clone(),
        "ID" => r.short_id().to_string(),
        "Digest" => r.digest.clone(),
        "Created" | "CreatedAt" => r.created.clone().unwrap_or_else(unknown),
        "CreatedSince" => r.created_time().map_or_else(unknown, |t| since(t, now)),
        "Size" => r.unpacked.map_or_else(unknown, bytes),
        "CompressedSize" => bytes(r.compressed),
        "Platform" => r.platform.clone(),
        _ => unknown(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_into_fields_and_text() {
        assert_eq!(
            Format::parse("{{.Repository}}:{{ .Tag }}").unwrap(),
            Format::Lines(vec![
                Piece::Field("Repository"),
                Piece::Text(":".into()),
                Piece::Field("Tag"),
            ])
        );
        assert_eq!(Format::parse("json").unwrap(), Format::Json);
        assert!(matches!(
            Format::parse("table {{.ID}}\\t{{.Size}}").unwrap(),
            Format::Table(p) if p.len() == 3
        ));
        let e = Format::parse("{{.Nope}}").unwrap_err().to_string();
        assert!(
            e.contains("`{{.Nope}}`") && e.contains("{{.Repository}}"),
            "{e}"
        );
        assert!(Format::parse("{{.ID").is_err());
        assert!(Format::parse("{{json .}}").is_err());
    }

    #[test]
    fn tables_align_at_tabs() {
        let lines = align(&["A\tBB\tC".into(), "AAAA\tB\tC".into()]);
        assert_eq!(lines, vec!["A      BB   C", "AAAA   B    C"]);
    }
}
