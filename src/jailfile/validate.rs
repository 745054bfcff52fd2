//! Checks on values after substitution: image references, FreeBSD release
//! names, stage names, platforms, ports, modes, paths. Each returns a
//! message and a hint; the caller attaches the span.

/// What is wrong and what to do instead.
pub(crate) type Problem = (String, String);

/// An OCI image reference, as the distribution spec's grammar has it:
/// `[registry[:port]/]path[:tag][@algorithm:hex]`, lowercase path.
pub(crate) fn image_reference(r: &str) -> Result<(), Problem> {
    let fix = || "write an image reference such as `registry.example.org/base/web:1.2`".to_string();
    if r.is_empty() {
        return Err(("empty image reference".into(), fix()));
    }
    if r.len() > 255 {
        return Err((
            "image reference is longer than 255 characters".into(),
            fix(),
        ));
    }
    let (name_tag, digest) = match r.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (r, None),
    };
    if let Some(d) = digest {
        let ok = d.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty()
                && alg
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+._-".contains(c))
                && hex.len() >= 32
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        });
        if !ok {
            return Err((
                format!("invalid digest `{d}` in image reference `{r}`"),
                "digests look like `sha256:` and 64 hex digits".into(),
            ));
        }
    }
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag.get(last_slash..).and_then(|t| t.find(':')) {
        Some(i) => (
            &name_tag[..last_slash + i],
            Some(&name_tag[last_slash + i + 1..]),
        ),
        None => (name_tag, None),
    };
    if let Some(tag) = tag {
        let mut cs = tag.chars();
        let ok = cs
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && cs.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            && tag.len() <= 128;
        if !ok {
            return Err((
                format!("invalid tag `{tag}` in image reference `{r}`"),
                "tags are letters, digits, `_`, `.` and `-` (at most 128)".into(),
            ));
        }
    }
    let parts: Vec<&str> = name.split('/').collect();
    let has_domain = parts.len() > 1
        && parts
            .first()
            .is_some_and(|p| p.contains(['.', ':']) || *p == "localhost");
    for (i, part) in parts.iter().enumerate() {
        let ok = if i == 0 && has_domain {
            domain(part)
        } else {
            path_component(part)
        };
        if !ok {
            if part.chars().any(|c| c.is_ascii_uppercase())
                && path_component(&part.to_ascii_lowercase())
            {
                return Err((
                    format!("image names must be lowercase: `{r}`"),
                    format!(
                        "write `{}`",
                        r.replacen(part, &part.to_ascii_lowercase(), 1)
                    ),
                ));
            }
            return Err((format!("invalid image reference `{r}`"), fix()));
        }
    }
    Ok(())
}

/// `[a-z0-9]+` joined by `.`, `_`, `__` or any number of `-`.
fn path_component(p: &str) -> bool {
    if p.is_empty()
        || !p
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
    {
        return false;
    }
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let (first, last) = (p.chars().next(), p.chars().last());
    if !first.is_some_and(alnum) || !last.is_some_and(alnum) {
        return false;
    }
    // Separators between alphanumerics: `.`, `_`, `__`, or `-`+.
    p.split(|c: char| alnum(c))
        .filter(|s| !s.is_empty())
        .all(|sep| sep == "." || sep == "_" || sep == "__" || sep.chars().all(|c| c == '-'))
}

fn domain(d: &str) -> bool {
    let (host, port) = match d.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (d, None),
    };
    if port.is_some_and(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit())) {
        return false;
    }
    !host.is_empty()
        && host.split('.').all(|c| {
            !c.is_empty()
                && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '-')
                && !c.starts_with('-')
                && !c.ends_with('-')
        })
}

/// `14.2-RELEASE` (or `14.2`), `13.4-RELEASE-p2`, `15.0-CURRENT`, `14.3-BETA1`,
/// `14.3-RC2`, `14.1-STABLE`... in any case; returned as FreeBSD spells it.
pub(crate) fn freebsd_release(tag: &str) -> Result<String, Problem> {
    let mut up = tag.to_ascii_uppercase();
    // `freebsd:14.3` is the release 14.3-RELEASE.
    if !up.contains('-') {
        up.push_str("-RELEASE");
    }
    let bad = || {
        (
            format!("`{tag}` is not a FreeBSD release"),
            "write the release as FreeBSD names it, e.g. freebsd:14.2-RELEASE, freebsd:13.4-RELEASE-p2, freebsd:15.0-CURRENT".to_string(),
        )
    };
    let (version, rest) = up.split_once('-').ok_or_else(bad)?;
    let mut nums = version.split('.');
    let numeric =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()));
    if !numeric(nums.next()) || !numeric(nums.next()) || nums.next().is_some() {
        return Err(bad());
    }
    let (branch, patch) = match rest.split_once("-P") {
        Some((b, p)) if numeric(Some(p)) => (b, Some(p)),
        Some(_) => return Err(bad()),
        None => (rest, None),
    };
    let counted = |prefix: &str| {
        branch
            .strip_prefix(prefix)
            .is_some_and(|n| numeric(Some(n)))
    };
    let ok = matches!(branch, "RELEASE" | "STABLE" | "CURRENT")
        || counted("BETA")
        || counted("RC")
        || counted("ALPHA");
    if !ok || (patch.is_some() && branch != "RELEASE") {
        return Err(bad());
    }
    Ok(match patch {
        Some(p) => format!("{version}-{branch}-p{p}"),
        None => up,
    })
}

/// Stage names: `[a-z][a-z0-9-_.]*` (after lowercasing).
pub(crate) fn stage_name(name: &str) -> Result<(), Problem> {
    let mut cs = name.chars();
    let ok = cs.next().is_some_and(|c| c.is_ascii_lowercase())
        && cs.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c));
    if ok {
        return Ok(());
    }
    Err((
        format!("invalid stage name `{name}`"),
        "stage names start with a letter and contain letters, digits, `-`, `_` and `.`".into(),
    ))
}

/// `os/arch[/variant]`, e.g. `freebsd/amd64`.
pub(crate) fn platform(p: &str) -> Result<(), Problem> {
    let parts: Vec<&str> = p.split('/').collect();
    let ok = (2..=3).contains(&parts.len())
        && parts.iter().all(|s| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        });
    if ok {
        return Ok(());
    }
    Err((
        format!("invalid platform `{p}`"),
        "write os/arch, e.g. --platform=freebsd/amd64 or freebsd/arm64".into(),
    ))
}

/// `80`, `443/tcp`, `53/udp`, `8000-8002/tcp` → `port/proto` entries.
pub(crate) fn ports(spec: &str) -> Result<Vec<String>, Problem> {
    let help = || {
        "EXPOSE takes port numbers (1-65535) with an optional /tcp, /udp or /sctp, e.g. EXPOSE 80 443/tcp 53/udp".to_string()
    };
    let (ports, proto) = match spec.split_once('/') {
        Some((p, proto)) => (p, proto.to_ascii_lowercase()),
        None => (spec, "tcp".to_string()),
    };
    if !matches!(proto.as_str(), "tcp" | "udp" | "sctp") {
        return Err((format!("unknown protocol `{proto}` in `{spec}`"), help()));
    }
    let port = |s: &str| {
        s.parse::<u16>()
            .ok()
            .filter(|p| *p > 0 && s.chars().all(|c| c.is_ascii_digit()))
    };
    let (lo, hi) = match ports.split_once('-') {
        Some((a, b)) => (port(a), port(b)),
        None => (port(ports), port(ports)),
    };
    match (lo, hi) {
        (Some(lo), Some(hi)) if lo <= hi => Ok((lo..=hi).map(|p| format!("{p}/{proto}")).collect()),
        _ => Err((format!("invalid port `{spec}`"), help())),
    }
}

/// An octal mode such as `0644` or `755`.
pub(crate) fn chmod(m: &str) -> Result<u32, Problem> {
    let ok = (1..=4).contains(&m.len()) && m.chars().all(|c| ('0'..='7').contains(&c));
    match u32::from_str_radix(m, 8) {
        Ok(v) if ok => Ok(v),
        _ => Err((
            format!("invalid --chmod `{m}`"),
            "give an octal mode such as --chmod=0644 or --chmod=755".into(),
        )),
    }
}

/// FreeBSD's signal names (without `SIG`), for STOPSIGNAL.
const SIGNALS: &[&str] = &[
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "IOT", "EMT", "FPE", "KILL", "BUS", "SEGV", "SYS",
    "PIPE", "ALRM", "TERM", "URG", "STOP", "TSTP", "CONT", "CHLD", "TTIN", "TTOU", "IO", "XCPU",
    "XFSZ", "VTALRM", "PROF", "WINCH", "INFO", "USR1", "USR2", "THR", "LIBRT",
];

/// A STOPSIGNAL: a signal name, with or without `SIG` and in any case
/// (`SIGINT`, `int`), or a number from 1 to 128, as Docker takes it.
pub(crate) fn signal(s: &str) -> Result<(), Problem> {
    if let Ok(n) = s.parse::<u32>() {
        if (1..=128).contains(&n) {
            return Ok(());
        }
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    if SIGNALS.contains(&name) {
        return Ok(());
    }
    Err((
        format!("`{s}` is not a signal"),
        "give a signal's name or number, e.g. STOPSIGNAL SIGINT or STOPSIGNAL 2".into(),
    ))
}

/// A duration as Go writes one (`30s`, `1m30s`, `1.5h`, `500ms`, `0`), in
/// nanoseconds: HEALTHCHECK's options, as Docker reads them.
pub(crate) fn duration(s: &str) -> Result<u64, Problem> {
    let bad = || {
        (
            format!("`{s}` is not a duration"),
            "write a number and a unit (ns, us, ms, s, m, h), e.g. 30s or 1m30s".to_string(),
        )
    };
    if s == "0" {
        return Ok(0);
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: f64 = match &rest[..u] {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        rest = &rest[u..];
        total += value * unit;
    }
    if total > u64::MAX as f64 / 2.0 {
        return Err(bad());
    }
    Ok(total.round() as u64)
}

/// Joins `path` to `cwd` (when relative) and normalises `.` and `..`.
pub(crate) fn join_workdir(cwd: &str, path: &str) -> String {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in full.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Whether an ARG or ENV name looks like it holds a secret, as BuildKit's
/// `SecretsUsedInArgOrEnv` check judges it: one of its `_`-separated
/// words (any case) is `password`, `token`, `secret`, `key`, ... and none
/// is `public`.
pub(crate) fn looks_secret(name: &str) -> bool {
    const SECRET: &[&str] = &[
        "apikey",
        "auth",
        "credential",
        "credentials",
        "key",
        "password",
        "pass",
        "passwd",
        "pword",
        "pwd",
        "secret",
        "token",
    ];
    let words: Vec<String> = name
        .split(['_', '-'])
        .map(str::to_ascii_lowercase)
        .collect();
    words.iter().any(|w| SECRET.contains(&w.as_str())) && !words.iter().any(|w| w == "public")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references() {
        for ok in [
            "nginx",
            "nginx:1.25",
            "ghcr.io/a/b:1",
            "localhost:5000/x",
            "a__b/c-d--e",
            "x@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert!(image_reference(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Nginx",
            "a//b",
            "-x",
            "x:",
            "x:-y",
            "x@sha256:zz",
            "re:gistry.io:x/y",
            "a b",
        ] {
            assert!(image_reference(bad).is_err(), "{bad}");
        }
        assert_eq!(
            image_reference("MyImage:1").unwrap_err().1,
            "write `myimage:1`"
        );
    }

    #[test]
    fn releases() {
        assert_eq!(freebsd_release("14.2-release").unwrap(), "14.2-RELEASE");
        assert_eq!(freebsd_release("14.3").unwrap(), "14.3-RELEASE");
        assert_eq!(
            freebsd_release("13.4-release-P2").unwrap(),
            "13.4-RELEASE-p2"
        );
        for ok in [
            "13.4-RELEASE-p2",
            "15.0-CURRENT",
            "14.3-BETA1",
            "14.3-RC2",
            "14.1-STABLE",
        ] {
            assert!(freebsd_release(ok).is_ok(), "{ok}");
        }
        for bad in [
            "latest",
            "14",
            "14.2.1",
            "14.2-FOO",
            "14.2-RC",
            "14.x-RELEASE",
            "15.0-CURRENT-p1",
            "14.2-RELEASE-p",
        ] {
            assert!(freebsd_release(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ports_modes_paths() {
        assert_eq!(ports("80").unwrap(), ["80/tcp"]);
        assert_eq!(ports("53/UDP").unwrap(), ["53/udp"]);
        assert_eq!(ports("8000-8001/sctp").unwrap(), ["8000/sctp", "8001/sctp"]);
        for bad in ["0", "65536", "http", "80/tcpp", "9-8", "+80"] {
            assert!(ports(bad).is_err(), "{bad}");
        }
        assert_eq!(chmod("0644").unwrap(), 0o644);
        assert!(
            chmod("u+x").is_err()
                && chmod("8").is_err()
                && chmod("").is_err()
                && chmod("07777").is_err()
        );
        assert_eq!(join_workdir("/usr/local", "../lib/./x/"), "/usr/lib/x");
        assert_eq!(join_workdir("/a", "/../../b"), "/b");
        assert!(
            stage_name("build-1.x_y").is_ok()
                && stage_name("1abc").is_err()
                && stage_name("a b").is_err()
        );
        assert!(platform("freebsd/amd64").is_ok() && platform("freebsd").is_err());
    }
}
