//! No input may make the Jailfile parser panic. A deterministic generator
//! (xorshift, fixed seed) builds random Jailfiles from a vocabulary of the
//! tokens that make parsing hard, and mutates valid ones; `load_str` must
//! return, Ok or Err, for every one of them.
//!
//! `JAILFILE_FUZZ_SEED` and `JAILFILE_FUZZ_ITERATIONS` run it longer or
//! elsewhere in the input space; the defaults are what CI runs.

use std::collections::BTreeMap;
use std::panic;
use std::path::Path;

use jbuild::jailfile::load_str;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const KEYWORDS: &[&str] = &[
    "FROM",
    "from",
    "ARG",
    "ENV",
    "LABEL",
    "RUN",
    "PKG",
    "COPY",
    "SYSRC",
    "SERVICE",
    "LINE_IN_FILE",
    "LIF",
    "RENDER",
    "INCLUDE",
    "JAIL",
    "USER",
    "WORKDIR",
    "EXPOSE",
    "VOLUME",
    "CMD",
    "ENTRYPOINT",
    "ADD",
    "ONBUILD",
    "RUNN",
    "É",
    "#",
    "# escape=`",
    "# escape=\\",
    "",
];

const TOKENS: &[&str] = &[
    "scratch",
    "freebsd:14.2-RELEASE",
    "freebsd:",
    "AS",
    "as",
    "b",
    "builder",
    "0",
    "1",
    "99999999999999999999",
    "--platform=freebsd/amd64",
    "--from=",
    "--from=b",
    "--from=0",
    "--chown=",
    "--chmod=0644",
    "--chmod=9",
    "--network=host",
    "--network",
    "--",
    "-f",
    "=",
    "+=",
    "-=",
    "a=b",
    "k=\"v w\"",
    "'",
    "\"",
    "\\",
    "`",
    "$",
    "${",
    "}",
    "${A}",
    "${A:-x}",
    "${A:+",
    "${:}",
    "$A",
    "$$",
    "\\$",
    "<<",
    "<<EOF",
    "<<-EOF",
    "<<'EOF'",
    "<<\"E\"",
    "<<<",
    "EOF",
    "E",
    "\tEOF",
    "[",
    "]",
    "[\"a\",",
    "\"b\"]",
    "[]",
    ",",
    "80",
    "80/tcp",
    "1-65535/udp",
    "0-0",
    "/",
    "..",
    ".",
    "/etc/rc.conf",
    "x.jf",
    "../y",
    "enable",
    "off",
    "日本語",
    "é",
    "🦀",
    "\u{0301}",
    "\u{feff}",
    " ",
    "  ",
    "\t",
    "\r",
    "a.b",
    "nginx",
];

fn random_jailfile(rng: &mut XorShift) -> String {
    let mut s = String::new();
    for _ in 0..rng.below(12) {
        s.push_str(rng.pick(KEYWORDS));
        for _ in 0..rng.below(7) {
            if rng.below(4) != 0 {
                s.push(' ');
            }
            s.push_str(rng.pick(TOKENS));
        }
        s.push_str(match rng.below(10) {
            0 => " \\\n",
            1 => "\r\n",
            2 => "\n\n",
            3 => "",
            _ => "\n",
        });
    }
    s
}

const VALID: &str = "# escape=\\\nARG REL=14.2-RELEASE\nFROM freebsd:${REL} AS build\nARG REL\nENV A=1 B=\"x y\"\n\
RUN --network=host pkg install -y \\\n  # c\n  nginx\nCOPY --chown=www:www --chmod=0644 <<a.conf <<-'b' /etc/\n$A\na.conf\n\tq\n\tb\n\
FROM scratch\nCOPY --from=build [\"/a\", \"/b/\"]\nSYSRC nginx_enable+=YES\nSERVICE nginx on\nLIF \"x\" /y\nJAIL allow.raw_sockets\n\
WORKDIR ../a\nEXPOSE 80 53/udp\nVOLUME /v\nCMD [\"a\"]\nENTRYPOINT sh -c ${X:-y}\nRUN <<EOF\necho\nEOF\n";

fn mutate(rng: &mut XorShift, base: &str) -> String {
    let mut chars: Vec<char> = base.chars().collect();
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 if !chars.is_empty() => {
                chars.remove(at.min(chars.len() - 1));
            }
            1 => {
                let end = (at + rng.below(20)).min(chars.len());
                chars.drain(at..end);
            }
            _ => {
                let tok: Vec<char> = rng.pick(TOKENS).chars().collect();
                chars.splice(at..at, tok);
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn no_input_makes_the_parser_panic() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("JAILFILE_FUZZ_SEED")
        .unwrap_or(0x9e37_79b9_7f4a_7c15)
        .max(1);
    let iterations = env("JAILFILE_FUZZ_ITERATIONS").unwrap_or(20_000) as usize;
    let mut rng = XorShift(seed);
    let args = BTreeMap::from([
        ("A".to_string(), "1".to_string()),
        ("REL".to_string(), "14.1-RELEASE".to_string()),
    ]);
    let path = Path::new("fuzz/Jailfile");
    let (mut ok, mut err) = (0, 0);
    for i in 0..iterations {
        let src = if i % 2 == 0 {
            random_jailfile(&mut rng)
        } else {
            mutate(&mut rng, VALID)
        };
        let src_for_load = src.clone();
        let result = panic::catch_unwind(|| load_str(path, &src_for_load, &args));
        match result {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(e)) => {
                // Rendering must not panic either, and must name the place.
                let shown = e.to_string();
                assert!(shown.contains("fuzz/Jailfile"), "{shown}");
                err += 1;
            }
            Err(_) => panic!("load_str panicked on input #{i}: {src:?}"),
        }
    }
    eprintln!("fuzz: {ok} loaded, {err} rejected");
    assert_eq!(ok + err, iterations);
    // The generator must exercise both paths, or it tests little.
    assert!(
        ok > iterations / 40 && err > iterations / 4,
        "ok={ok} err={err}"
    );
}
