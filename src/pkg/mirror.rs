//! Where a `pkg+http://` or `pkg+https://` repository is fetched from: the
//! mirrors its DNS SRV records name, in pkg's order, then the host itself.
//!
//! What pkg does (`libpkg/fetch_libcurl.c`, `libpkg/dns_utils.c`), for a
//! repository with `mirror_type: srv` and a `pkg+SCHEME://HOST/PATH` url:
//! it asks for the SRV records of `_SCHEME._tcp.HOST` (so
//! `_https._tcp.pkg.FreeBSD.org` for `pkg+https://`), orders them by
//! priority, lowest first, and within one priority by a weighted random
//! draw, then fetches `SCHEME://TARGET:PORT/PATH` from the first target,
//! moving to the next on a failure. No record: it says so and asks HOST.
//! jbuild does the same, and puts HOST itself after the targets, so a
//! build still reaches the repository when every mirror is down (pkg would
//! retry the mirrors instead).
//!
//! [`candidates`] gives that list; the caller tries each in turn. A url
//! without `pkg+` is its own only candidate. `mirror_type: http` (a list
//! of mirrors served at the url) is [`list`].
//!
//! The lookup is a small query of jbuild's own ([`dns`]) rather than a DNS
//! library: the well-kept Rust resolvers (hickory) bring a runtime of
//! their own, where jbuild keeps one (`transport::runtime`) and the
//! architecture test holds it to that; and one question with a bounded
//! answer is all that is needed. Nameservers are the host's
//! (`/etc/resolv.conf`: `nameserver`, `options timeout:N attempts:N`), as
//! pkg's `res_query` reads them.

pub mod dns;
pub mod list;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

pub use dns::SrvRecord;

/// The host's resolv.conf.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";
/// At most this many nameservers are asked, as the C library's MAXNS.
const MAX_SERVERS: usize = 3;

/// Who is asked for SRV records, and how patiently.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    pub servers: Vec<SocketAddr>,
    pub timeout: Duration,
    pub attempts: u32,
}

impl Resolver {
    /// The host's nameservers ([`RESOLV_CONF`]); none when it cannot be
    /// read (then every lookup finds nothing, and the host is asked).
    pub fn system() -> Resolver {
        Resolver::from_file(Path::new(RESOLV_CONF))
    }

    /// The nameservers of the resolv.conf(5) at `path`.
    pub fn from_file(path: &Path) -> Resolver {
        let text = std::fs::read(path)
            .map(|b| String::from_utf8_lossy(&b[..b.len().min(64 * 1024)]).into_owned())
            .unwrap_or_default();
        Resolver::from_resolv_conf(&text)
    }

    /// The nameservers of resolv.conf(5) text: `nameserver` lines (port
    /// 53), `options timeout:N attempts:N` (the C library's defaults, 5 s
    /// and 2, capped at 30 s and 5).
    pub fn from_resolv_conf(text: &str) -> Resolver {
        let mut r = Resolver {
            servers: Vec::new(),
            timeout: Duration::from_secs(5),
            attempts: 2,
        };
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // A scoped IPv6 address (`fe80::1%eth0`) is left out.
                    if let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) {
                        if r.servers.len() < MAX_SERVERS {
                            r.servers.push(SocketAddr::new(ip, 53));
                        }
                    }
                }
                Some("options") => {
                    for w in words {
                        let n = |p: &str| w.strip_prefix(p).and_then(|v| v.parse::<u64>().ok());
                        if let Some(t) = n("timeout:") {
                            r.timeout = Duration::from_secs(t.clamp(1, 30));
                        }
                        if let Some(a) = n("attempts:") {
                            r.attempts = a.clamp(1, 5) as u32;
                        }
                    }
                }
                _ => {}
            }
        }
        r
    }

    /// The nameservers `[pkg] nameservers` names (`IP`, `IP:PORT` or
    /// `[IPv6]:PORT`; port 53 when none is given), with the C library's
    /// patience (5 s, 2 attempts); `None` for an empty list (the host's
    /// resolv.conf then). An address it cannot read is the user's mistake,
    /// named in the error.
    pub fn of_servers(list: &[String]) -> Result<Option<Resolver>, String> {
        if list.is_empty() {
            return Ok(None);
        }
        let mut servers = Vec::with_capacity(list.len());
        for s in list {
            let addr = s
                .parse::<SocketAddr>()
                .or_else(|_| s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
                .map_err(|_| {
                    format!(
                        "[pkg] nameservers: `{s}` is not an address (IP, IP:PORT or [IPv6]:PORT)"
                    )
                })?;
            servers.push(addr);
        }
        Ok(Some(Resolver {
            servers,
            timeout: Duration::from_secs(5),
            attempts: 2,
        }))
    }

    /// The SRV records of `name`, unordered; empty when there are none or
    /// no server answered.
    pub fn srv(&self, name: &str) -> Vec<SrvRecord> {
        match dns::query_srv(name, &self.servers, self.timeout, self.attempts) {
            Ok(records) => records,
            Err(e) => {
                tracing::debug!(name, "no SRV records: {e}");
                Vec::new()
            }
        }
    }
}

/// The base urls to fetch the repository at `url` from, in order: for
/// `pkg+SCHEME://HOST[:PORT]/PATH`, `SCHEME://TARGET:PORT/PATH` for each
/// SRV record of `_SCHEME._tcp.HOST` that `resolver` finds, by priority
/// and weight as pkg orders them, then `SCHEME://HOST[:PORT]/PATH`
/// itself; for any other url, the url alone. `pkg+` is never in what it
/// gives. Asks the network once; never fails (no answer: the host alone).
pub fn candidates(url: &str, resolver: &Resolver) -> Vec<String> {
    candidates_drawn(url, resolver, &mut fastrand::Rng::new())
}

/// [`candidates`], with the weighted draws taken from `rng`.
pub fn candidates_drawn(url: &str, resolver: &Resolver, rng: &mut fastrand::Rng) -> Vec<String> {
    let Some(plain) = url.strip_prefix("pkg+") else {
        return vec![url.to_string()];
    };
    let Ok(parsed) = url::Url::parse(plain) else {
        return vec![plain.to_string()];
    };
    let Some(host) = parsed
        .host_str()
        .filter(|_| parsed.scheme().starts_with("http"))
    else {
        return vec![plain.to_string()];
    };
    let zone = format!("_{}._tcp.{}", parsed.scheme(), host.trim_end_matches('.'));
    // `Url` writes an empty path as `/`; the caller's url is kept as given.
    let as_given = |u: &url::Url| {
        let text = u.to_string();
        if !plain.ends_with('/') && u.path() == "/" {
            text.trim_end_matches('/').to_string()
        } else {
            text
        }
    };
    let mut out = Vec::new();
    for record in order(resolver.srv(&zone), rng) {
        let mut mirror = parsed.clone();
        if mirror.set_host(Some(&record.target)).is_err()
            || mirror.set_port(Some(record.port)).is_err()
        {
            continue;
        }
        let mirror = as_given(&mirror);
        if !out.contains(&mirror) {
            out.push(mirror);
        }
    }
    let own = as_given(&parsed);
    if !out.contains(&own) {
        out.push(own);
    }
    out
}

/// `records` in the order pkg tries them: by priority, lowest first; in
/// one priority a weighted draw without replacement (RFC 2782: a record
/// of weight w is drawn next with a chance of w over the weights left;
/// records of weight 0 after the others). A target of `.` says the
/// service is not there and is left out.
pub fn order(records: Vec<SrvRecord>, rng: &mut fastrand::Rng) -> Vec<SrvRecord> {
    let mut records: Vec<SrvRecord> = records.into_iter().filter(|r| r.target != ".").collect();
    records.sort_by_key(|r| r.priority);
    let mut out = Vec::with_capacity(records.len());
    while !records.is_empty() {
        let p = records[0].priority;
        let n = records.iter().take_while(|r| r.priority == p).count();
        let mut group: Vec<SrvRecord> = records.drain(..n).collect();
        while !group.is_empty() {
            let total: u64 = group.iter().map(|r| u64::from(r.weight)).sum();
            let pick = if total == 0 {
                0
            } else {
                let mut at = rng.u64(..total);
                group
                    .iter()
                    .position(|r| {
                        let w = u64::from(r.weight);
                        if at < w {
                            true
                        } else {
                            at -= w;
                            false
                        }
                    })
                    .unwrap_or(0)
            };
            out.push(group.remove(pick));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(priority: u16, weight: u16, target: &str) -> SrvRecord {
        SrvRecord {
            priority,
            weight,
            port: 443,
            target: target.into(),
        }
    }

    #[test]
    fn priority_first_then_weight() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut first_heavy = 0;
        for _ in 0..1000 {
            let got = order(
                vec![
                    rec(20, 0, "backup"),
                    rec(10, 90, "heavy"),
                    rec(10, 10, "light"),
                    rec(5, 0, "."),
                ],
                &mut rng,
            );
            let names: Vec<&str> = got.iter().map(|r| r.target.as_str()).collect();
            assert_eq!(names.len(), 3);
            assert_eq!(names[2], "backup", "{names:?}");
            if names[0] == "heavy" {
                first_heavy += 1;
            }
        }
        // 90 of 100 by weight: well inside 800..980 for 1000 draws.
        assert!((800..980).contains(&first_heavy), "{first_heavy}");
    }

    #[test]
    fn resolv_conf_as_the_c_library_reads_it() {
        let r = Resolver::from_resolv_conf(
            "# comment\nsearch example.org\nnameserver 192.0.2.1\nnameserver ::1\n\
             nameserver fe80::1%eth0\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n\
             options ndots:2 timeout:1 attempts:9\n",
        );
        assert_eq!(
            r.servers,
            vec![
                "192.0.2.1:53".parse().unwrap(),
                "[::1]:53".parse().unwrap(),
                "192.0.2.2:53".parse().unwrap(),
            ]
        );
        assert_eq!((r.timeout, r.attempts), (Duration::from_secs(1), 5));
    }

    #[test]
    fn a_url_without_pkg_plus_or_without_records_is_asked_itself() {
        let nobody = Resolver {
            servers: Vec::new(),
            timeout: Duration::from_millis(10),
            attempts: 1,
        };
        assert_eq!(
            candidates("https://pkg.example.org/FreeBSD:14:amd64/latest", &nobody),
            vec!["https://pkg.example.org/FreeBSD:14:amd64/latest"]
        );
        assert_eq!(
            candidates(
                "pkg+https://pkg.example.org/FreeBSD:14:amd64/latest",
                &nobody
            ),
            vec!["https://pkg.example.org/FreeBSD:14:amd64/latest"]
        );
        assert_eq!(
            candidates("pkg+http://pkg.example.org", &nobody),
            vec!["http://pkg.example.org"]
        );
    }
}
