//! `jbuild::pkg::mkdb`: `services_mkdb` and `cap_mkdb` as the base's
//! package scripts run them, their databases read back by Debian's
//! `db_dump185` (and looked up through libdb1's `get`) at the keys
//! services_mkdb(8) and cap_mkdb(1) use, built here from their formats.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use jbuild::pkg::mkdb::{cap_mkdb, services_mkdb};
use jbuild::pkg::script::Io;

use super::dump185::{assert_found, pairs as dump, sorted};

fn run(
    cmd: fn(&Path, &[String], &mut Io<'_>) -> Result<i32, jbuild::pkg::script::CommandError>,
    root: &Path,
    args: &[&str],
) -> (i32, String) {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = Io {
        stdin: b"",
        stdout: &mut out,
        stderr: &mut err,
    };
    let code = cmd(root, &args, &mut io).unwrap();
    (code, String::from_utf8(err).unwrap())
}

const SERVICES: &str = "\
#
# Network services, Internet style
#
ssh\t\t 22/tcp\t   # Secure Shell Login
ssh\t\t 22/udp\t   # Secure Shell Login
domain\t\t 53/tcp\t   #Domain Name Server
domain\t\t 53/udp\t   #Domain Name Server
http\t\t 80/tcp\t   www www-http #World Wide Web HTTP
kerberos-sec\t 88/tcp\t   kerberos kerberos5 krb5 # Kerberos 5
www\t\t 8080/tcp\n";

#[test]
fn services_db_holds_services_mkdb_keys_in_the_order_asked_for() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::create_dir_all(root.join("var/db")).unwrap();
    std::fs::write(root.join("etc/services"), SERVICES).unwrap();
    // The runtime package's line, with -l and -b for ${CAP_MKDB_ENDIAN}.
    for (flag, lorder) in [("-l", 1234u32), ("-b", 4321)] {
        let (code, err) = run(
            services_mkdb,
            root,
            &[flag, "-q", "-o", "/var/db/services.db", "/etc/services"],
        );
        assert_eq!((code, err.as_str()), (0, ""));
        let db = root.join("var/db/services.db");
        let bytes = std::fs::read(&db).unwrap();
        assert_eq!(u32::from_be_bytes(bytes[8..12].try_into().unwrap()), lorder);
        assert_eq!(
            u32::from_be_bytes(bytes[12..16].try_into().unwrap()),
            256,
            "bsize"
        );
        assert_eq!(
            std::fs::metadata(&db).unwrap().permissions().mode() & 0o777,
            0o644
        );

        // (port, proto) ascending, protocols in the file's order (tcp 0,
        // udp 1); N counts the entries; "www" of 8080 is a duplicate of
        // http's alias and keeps the first value.
        let entries: [(&str, &str, &str, &[&str]); 6] = [
            ("0", "ssh", "22/tcp", &[]),
            ("1", "ssh", "22/udp", &[]),
            ("2", "domain", "53/tcp", &[]),
            ("3", "domain", "53/udp", &[]),
            ("4", "http", "80/tcp", &["www", "www-http"]),
            (
                "5",
                "kerberos-sec",
                "88/tcp",
                &["kerberos", "kerberos5", "krb5"],
            ),
        ];
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut put = |k: Vec<u8>, d: Vec<u8>| {
            if !want.iter().any(|(x, _)| *x == k) {
                want.push((k, d));
            }
        };
        let z = |s: String| [s.into_bytes(), vec![0]].concat();
        let m = |b: u8, s: String| [vec![b], s.into_bytes(), vec![0]].concat();
        let mut all: Vec<(String, String, String, Vec<&str>)> = entries
            .iter()
            .map(|(n, name, pp, al)| (n.to_string(), name.to_string(), pp.to_string(), al.to_vec()))
            .collect();
        all.push(("6".into(), "www".into(), "8080/tcp".into(), vec![]));
        for (n, name, pp, aliases) in &all {
            let line: String = aliases.iter().map(|a| format!("{a} ")).collect();
            put(z(n.clone()), z(format!("{name} {pp} {line}")));
            let (port, proto) = pp.split_once('/').unwrap();
            put(m(0xff, pp.clone()), z(n.clone()));
            put(m(0xff, port.to_string()), z(n.clone()));
            for a in std::iter::once(name.as_str()).chain(aliases.iter().copied()) {
                put(m(0xfe, format!("{a}/{proto}")), z(n.clone()));
                put(m(0xfe, a.to_string()), z(n.clone()));
            }
        }
        assert_eq!(sorted(dump(&db)), sorted(want.clone()), "{flag}");
        assert_found(&db, &want);
    }
    // Without -q each key met again is said (the port and name keys of a
    // service on two protocols too: why the runtime package passes -q).
    let (code, err) = run(
        services_mkdb,
        root,
        &["-o", "/var/db/s2.db", "/etc/services"],
    );
    assert_eq!(code, 0);
    let said: Vec<&str> = err.lines().collect();
    assert_eq!(
        said,
        ["22", "ssh", "53", "domain", "www/tcp", "www"]
            .map(|k| format!("services_mkdb: duplicate service `{k}'"))
    );
}

const LOGIN_CONF: &str = "\
# login.conf
default:\\
\t:passwd_format=sha512:\\
\t:umask=022:

standard:\\
\t:tc=default:
russian|Russian Users Accounts:\\
\t:lang=ru_RU.UTF-8:\\
\t:tc=default:
broken:\\
\t:tc=nosuch:
";

#[test]
fn login_conf_db_holds_records_and_shadow_names() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/login.conf"), LOGIN_CONF).unwrap();
    let (code, err) = run(cap_mkdb, root, &["/etc/login.conf"]);
    assert_eq!(code, 0);
    assert_eq!(err, "cap_mkdb: record not tc expanded: broken\n");
    let db = root.join("etc/login.conf.db");
    let rec = |status: u8, s: &str| [vec![status], s.as_bytes().to_vec(), vec![0]].concat();
    let default = "default:\t:passwd_format=sha512:\t:umask=022:";
    let want: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"default".to_vec(), rec(0, default)),
        (b"standard".to_vec(), rec(0, "standard:\t:\t:passwd_format=sha512:\t:umask=022:")),
        (
            b"russian|Russian Users Accounts".to_vec(),
            rec(0, "russian|Russian Users Accounts:\t:lang=ru_RU.UTF-8:\t:\t:passwd_format=sha512:\t:umask=022:"),
        ),
        (b"russian".to_vec(), [&b"\x02"[..], b"russian|Russian Users Accounts"].concat()),
        (b"Russian Users Accounts".to_vec(), [&b"\x02"[..], b"russian|Russian Users Accounts"].concat()),
        (b"broken".to_vec(), rec(1, "broken:\t:tc=nosuch:")),
    ];
    assert_eq!(sorted(dump(&db)), sorted(want.clone()));
    assert_found(&db, &want);
    // -f names the database, -b its order.
    assert_eq!(
        run(
            cap_mkdb,
            root,
            &["-b", "-f", "/etc/other", "/etc/login.conf"]
        )
        .0,
        0
    );
    let bytes = std::fs::read(root.join("etc/other.db")).unwrap();
    assert_eq!(u32::from_be_bytes(bytes[8..12].try_into().unwrap()), 4321);
    assert_eq!(sorted(dump(&root.join("etc/other.db"))), sorted(want));
}
