//! `pkg+https://` mirrors by DNS SRV (`pkg::mirror`), against the tests'
//! own DNS server (`tests/support/dns.rs`) on 127.0.0.1: the targets in
//! pkg's order then the host; a forged answer ignored; a cut answer asked
//! again over TCP; a silent server or no records: the host alone; and the
//! nameserver taken from a resolv.conf, on port 53 of an address of its
//! own in 127/8 (root).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jbuild::pkg::mirror::{candidates, Resolver};

use crate::support::dns::{DnsServer, Quirks, Srv};

const URL: &str = "pkg+https://pkg.example.test/FreeBSD:14:amd64/quarterly";

fn zone(records: Vec<Srv>) -> BTreeMap<String, Vec<Srv>> {
    [("_https._tcp.pkg.example.test".to_string(), records)].into()
}

fn resolver(server: &DnsServer) -> Resolver {
    Resolver {
        servers: vec![server.addr],
        timeout: Duration::from_millis(500),
        attempts: 1,
    }
}

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn srv_targets_by_priority_then_the_host() {
    let server = DnsServer::start(
        any_port(),
        zone(vec![
            (20, 0, 443, "backup.example.test"),
            (10, 5, 8443, "m1.example.test"),
            (30, 0, 443, "."),
        ]),
        Quirks::default(),
    );
    assert_eq!(
        candidates(URL, &resolver(&server)),
        vec![
            "https://m1.example.test:8443/FreeBSD:14:amd64/quarterly",
            "https://backup.example.test/FreeBSD:14:amd64/quarterly",
            "https://pkg.example.test/FreeBSD:14:amd64/quarterly",
        ]
    );
    // Not `pkg+`: no lookup at all.
    let before = server.asked.load(Ordering::SeqCst);
    assert_eq!(
        candidates("https://pkg.example.test/x", &resolver(&server)),
        vec!["https://pkg.example.test/x"]
    );
    assert_eq!(server.asked.load(Ordering::SeqCst), before);
}

#[test]
fn a_forged_answer_is_ignored_and_a_cut_one_asked_over_tcp() {
    let forged = DnsServer::start(
        any_port(),
        zone(vec![(10, 0, 443, "m1.example.test")]),
        Quirks {
            forge_first: true,
            ..Quirks::default()
        },
    );
    assert_eq!(
        candidates(URL, &resolver(&forged))[0],
        "https://m1.example.test/FreeBSD:14:amd64/quarterly"
    );

    // Twenty long targets do not fit in 512 bytes: the UDP answer is cut.
    let names: Vec<&'static str> = (0..20)
        .map(|i| &*format!("mirror-with-a-long-name-{i:02}.example.test").leak())
        .collect();
    let many: Vec<Srv> = names.iter().map(|n| (10, 1, 443, *n)).collect();
    let cut = DnsServer::start(
        any_port(),
        zone(many),
        Quirks {
            truncate_udp: true,
            ..Quirks::default()
        },
    );
    let got = candidates(URL, &resolver(&cut));
    assert_eq!(got.len(), 21, "{got:?}");
    assert_eq!(cut.asked_tcp.load(Ordering::SeqCst), 1);
}

#[test]
fn no_answer_or_no_records_leaves_the_host() {
    let silent = DnsServer::start(
        any_port(),
        zone(vec![(10, 0, 443, "m1.example.test")]),
        Quirks {
            silent: true,
            ..Quirks::default()
        },
    );
    let started = Instant::now();
    let r = Resolver {
        attempts: 2,
        ..resolver(&silent)
    };
    assert_eq!(
        candidates(URL, &r),
        vec!["https://pkg.example.test/FreeBSD:14:amd64/quarterly"]
    );
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "bounded by timeout × attempts: {took:?}"
    );
    assert_eq!(silent.asked.load(Ordering::SeqCst), 2);

    let empty = DnsServer::start(any_port(), BTreeMap::new(), Quirks::default());
    assert_eq!(
        candidates(URL, &resolver(&empty)),
        vec!["https://pkg.example.test/FreeBSD:14:amd64/quarterly"]
    );
}

#[test]
fn the_nameserver_comes_from_resolv_conf() {
    need!(Root);
    // Port 53 of an address in 127/8 no other test uses.
    let ip = format!("127.53.{}.{}", fastrand::u8(1..255), fastrand::u8(1..255));
    let server = DnsServer::start(
        format!("{ip}:53").parse().unwrap(),
        zone(vec![(10, 0, 443, "m1.example.test")]),
        Quirks::default(),
    );
    let t = tempfile::tempdir().unwrap();
    let conf = t.path().join("resolv.conf");
    std::fs::write(
        &conf,
        format!("search example.test\nnameserver {ip}\noptions timeout:1 attempts:1\n"),
    )
    .unwrap();
    let r = Resolver::from_file(&conf);
    assert_eq!(r.servers, vec![server.addr]);
    assert_eq!(
        candidates(URL, &r),
        vec![
            "https://m1.example.test/FreeBSD:14:amd64/quarterly",
            "https://pkg.example.test/FreeBSD:14:amd64/quarterly",
        ]
    );
}
