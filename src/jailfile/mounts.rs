//! `RUN --mount=type=...,key=value,...`: BuildKit's syntax, split at
//! commas, each value substituted in the instruction's scope, then checked
//! option by option so an error points at the option that is wrong.

use super::diagnostic::{Error, Result};
use super::resolve::Resolver;
use super::resolved::{MountKind, RunMount, Sharing};
use super::text::Text;
use super::validate;

const USAGE: &str =
    "--mount=type=secret,id=ID[,target=PATH][,required=true][,mode=0400][,uid=N][,gid=N] \
| type=cache,target=PATH[,id=ID][,sharing=shared|locked|private][,mode=0755][,uid=N][,gid=N] \
| type=tmpfs,target=PATH[,size=BYTES] \
| type=bind,target=PATH[,from=STAGE|IMAGE][,source=PATH][,rw]";

/// The options each type takes (besides `type`), with their aliases.
const OPTIONS: &[(&str, &[&str])] = &[
    (
        "secret",
        &[
            "id",
            "target",
            "dst",
            "destination",
            "required",
            "mode",
            "uid",
            "gid",
        ],
    ),
    (
        "cache",
        &[
            "id",
            "target",
            "dst",
            "destination",
            "sharing",
            "mode",
            "uid",
            "gid",
        ],
    ),
    ("tmpfs", &["target", "dst", "destination", "size"]),
    (
        "bind",
        &[
            "target",
            "dst",
            "destination",
            "from",
            "source",
            "src",
            "rw",
            "readwrite",
            "ro",
            "readonly",
        ],
    ),
];

/// One `key=value` (or bare `key`) of a `--mount` value.
struct Opt {
    name: String,
    name_text: Text,
    value: Option<(String, Text)>,
}

impl Opt {
    fn span_text(&self) -> &Text {
        self.value.as_ref().map_or(&self.name_text, |(_, t)| t)
    }

    fn value(&self) -> Result<&str> {
        match &self.value {
            Some((v, _)) if !v.is_empty() => Ok(v),
            _ => Err(Error::new(
                self.name_text.span(),
                format!("mount option `{}` needs a value", self.name),
            )
            .with_help(USAGE)),
        }
    }

    fn bool(&self) -> Result<bool> {
        let Some((v, t)) = &self.value else {
            return Ok(true);
        };
        match v.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(Error::new(
                t.span(),
                format!("`{}={v}`: expected true or false", self.name),
            )),
        }
    }

    fn number(&self) -> Result<u32> {
        let v = self.value()?;
        v.parse().map_err(|_| {
            Error::new(
                self.span_text().span(),
                format!("`{}={v}`: expected a number", self.name),
            )
            .with_help("uid and gid are numeric ids, e.g. uid=0")
        })
    }

    fn mode(&self) -> Result<u32> {
        let v = self.value()?;
        validate::chmod(v).map_err(|_| {
            Error::new(self.span_text().span(), format!("invalid mount mode `{v}`"))
                .with_help("give an octal mode such as mode=0400")
        })
    }
}

/// The options of one `--mount` value, and the value itself (for errors
/// about an option that is missing).
struct Opts<'t> {
    list: Vec<Opt>,
    whole: &'t Text,
    ty: String,
    /// `target=` (or an alias), checked first whatever the type.
    target: Option<String>,
}

impl Opts<'_> {
    /// The option under any of `names` (its aliases).
    fn get(&self, names: &[&str]) -> Option<&Opt> {
        self.list.iter().find(|o| names.contains(&o.name.as_str()))
    }

    fn need_target(&self) -> Result<String> {
        self.target.clone().ok_or_else(|| {
            Error::new(
                self.whole.span(),
                format!("a {} mount needs target=PATH", self.ty),
            )
            .with_help(format!("usage: {USAGE}"))
        })
    }

    fn mode(&self, default: u32) -> Result<u32> {
        self.get(&["mode"]).map_or(Ok(default), Opt::mode)
    }

    fn num(&self, name: &str) -> Result<u32> {
        self.get(&[name]).map_or(Ok(0), Opt::number)
    }

    fn secret(&self) -> Result<RunMount> {
        let Some(id) = self.get(&["id"]) else {
            return Err(Error::new(self.whole.span(), "a secret mount needs id=ID")
                .with_help("name the secret given with --secret id=ID,src=FILE"));
        };
        let id = id_of(id)?;
        let kind = MountKind::Secret {
            required: self.get(&["required"]).map_or(Ok(false), Opt::bool)?,
            mode: self.mode(0o400)?,
            uid: self.num("uid")?,
            gid: self.num("gid")?,
            id: id.clone(),
        };
        let target = self
            .target
            .clone()
            .unwrap_or_else(|| format!("/run/secrets/{id}"));
        Ok(RunMount { target, kind })
    }

    fn cache(&self) -> Result<RunMount> {
        let target = self.need_target()?;
        let sharing = match self.get(&["sharing"]) {
            None => Sharing::Shared,
            Some(o) => match o.value()? {
                "shared" => Sharing::Shared,
                "locked" => Sharing::Locked,
                "private" => Sharing::Private,
                other => {
                    return Err(Error::new(
                        o.span_text().span(),
                        format!("unknown sharing mode `{other}`"),
                    )
                    .with_help("use sharing=shared, sharing=locked or sharing=private"))
                }
            },
        };
        let id = match self.get(&["id"]) {
            Some(o) => id_of(o)?,
            None => target.clone(),
        };
        Ok(MountKind::Cache {
            id,
            sharing,
            mode: self.mode(0o755)?,
            uid: self.num("uid")?,
            gid: self.num("gid")?,
        }
        .at(target))
    }

    fn tmpfs(&self) -> Result<RunMount> {
        let target = self.need_target()?;
        let size = match self.get(&["size"]) {
            None => None,
            Some(o) => Some(size(o)?),
        };
        Ok(MountKind::Tmpfs { size }.at(target))
    }

    /// A bind mount's source: a path inside its root, `.` for the root.
    fn bind_source(&self) -> Result<String> {
        let Some(o) = self.get(&["source", "src"]) else {
            return Ok(".".to_string());
        };
        let v = o.value()?;
        let norm = validate::join_workdir("/", v);
        if v.split('/').any(|p| p == "..") {
            return Err(Error::new(
                o.span_text().span(),
                format!("bind source `{v}` leaves its root"),
            )
            .with_help(
                "name a path inside the context (or the from= stage or image), without `..`",
            ));
        }
        Ok(match norm.trim_start_matches('/') {
            "" => ".".to_string(),
            rel => rel.to_string(),
        })
    }

    fn read_write(&self) -> Result<bool> {
        Ok(
            match (
                self.get(&["rw", "readwrite"]),
                self.get(&["ro", "readonly"]),
            ) {
                (Some(o), _) => o.bool()?,
                (None, Some(o)) => !o.bool()?,
                (None, None) => false,
            },
        )
    }
}

/// A cache's or a secret's id: a name without `/`.
fn id_of(o: &Opt) -> Result<String> {
    let v = o.value()?;
    if v.contains(['/', '\0']) || v == "." || v == ".." {
        return Err(
            Error::new(o.span_text().span(), format!("invalid mount id `{v}`"))
                .with_help("an id is a name without `/`, e.g. id=npm"),
        );
    }
    Ok(v.to_string())
}

impl Resolver<'_> {
    /// The mount one `--mount=` value describes.
    pub(super) fn run_mount(&mut self, t: &Text, esc: char) -> Result<RunMount> {
        let list = self.mount_options(t, esc)?;
        let Some(ty) = list.iter().find(|o| o.name == "type") else {
            return Err(
                Error::new(t.span(), "--mount needs a type").with_help(format!("usage: {USAGE}"))
            );
        };
        let ty_name = ty.value()?.to_ascii_lowercase();
        let Some((_, allowed)) = OPTIONS.iter().find(|(n, _)| *n == ty_name) else {
            return Err(Error::new(
                ty.span_text().span(),
                format!("unknown mount type `{ty_name}`"),
            )
            .with_help("jbuild's mount types are secret, cache, tmpfs and bind"));
        };
        for o in list.iter().filter(|o| o.name != "type") {
            if !allowed.contains(&o.name.as_str()) {
                return Err(Error::new(
                    o.name_text.span(),
                    format!("`{}` is not an option of a {ty_name} mount", o.name),
                )
                .with_help(format!("{ty_name} mounts take {}", allowed.join(", "))));
            }
        }
        let target = list
            .iter()
            .find(|o| ["target", "dst", "destination"].contains(&o.name.as_str()))
            .map(target)
            .transpose()?;
        let opts = Opts {
            list,
            whole: t,
            ty: ty_name,
            target,
        };
        match opts.ty.as_str() {
            "secret" => opts.secret(),
            "cache" => opts.cache(),
            "tmpfs" => opts.tmpfs(),
            _ => {
                let target = opts.need_target()?;
                let from = match opts.get(&["from"]) {
                    None => None,
                    Some(o) => {
                        let (_, text) = o
                            .value
                            .clone()
                            .unwrap_or_else(|| (String::new(), o.name_text.clone()));
                        Some(self.stage_or_image(&text, esc, ("--mount from", "RUN"))?)
                    }
                };
                let source = opts.bind_source()?;
                let rw = opts.read_write()?;
                Ok(MountKind::Bind { from, source, rw }.at(target))
            }
        }
    }

    /// The `key=value` pieces of a `--mount` value, each value
    /// substituted; a key given twice is refused.
    fn mount_options(&mut self, t: &Text, esc: char) -> Result<Vec<Opt>> {
        let mut opts = Vec::new();
        for piece in split_commas(t) {
            if piece.is_empty() {
                continue;
            }
            let (name_text, value) = match (0..piece.len()).find(|&i| piece.char_at(i) == Some('='))
            {
                Some(eq) => {
                    let v = piece.slice_from(eq + 1);
                    (piece.slice(0, eq), Some((self.word(&v, esc)?, v)))
                }
                None => (piece.clone(), None),
            };
            let name = name_text.as_string().to_ascii_lowercase();
            if opts.iter().any(|o: &Opt| o.name == name) {
                return Err(Error::new(
                    name_text.span(),
                    format!("mount option `{name}` is given twice"),
                ));
            }
            opts.push(Opt {
                name,
                name_text,
                value,
            });
        }
        Ok(opts)
    }
}

impl MountKind {
    fn at(self, target: String) -> RunMount {
        RunMount { target, kind: self }
    }
}

/// An absolute target, normalised; `/` itself is refused.
fn target(o: &Opt) -> Result<String> {
    let v = o.value()?;
    let span = o.span_text().span();
    if !v.starts_with('/') {
        return Err(
            Error::new(span, format!("mount target `{v}` is not an absolute path"))
                .with_help(format!("write target=/{v}")),
        );
    }
    let norm = validate::join_workdir("/", v);
    if norm == "/" {
        return Err(Error::new(span, "a mount cannot cover the whole root")
            .with_help("give a directory such as target=/var/cache/build"));
    }
    Ok(norm)
}

/// `size=` in bytes, with an optional k, m or g suffix (powers of 1024).
fn size(o: &Opt) -> Result<u64> {
    let v = o.value()?;
    let lower = v.to_ascii_lowercase();
    let (digits, mult) = match lower.trim_end_matches('b').chars().last() {
        Some('k') => (&lower[..lower.trim_end_matches('b').len() - 1], 1u64 << 10),
        Some('m') => (&lower[..lower.trim_end_matches('b').len() - 1], 1 << 20),
        Some('g') => (&lower[..lower.trim_end_matches('b').len() - 1], 1 << 30),
        _ => (lower.as_str(), 1),
    };
    match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(
            Error::new(o.span_text().span(), format!("invalid tmpfs size `{v}`"))
                .with_help("give bytes, or a number with k, m or g, e.g. size=64m"),
        ),
    }
}

/// The pieces of `t` between commas.
fn split_commas(t: &Text) -> Vec<Text> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..=t.len() {
        if i == t.len() || t.char_at(i) == Some(',') {
            out.push(t.slice(start, i));
            start = i + 1;
        }
    }
    out
}
