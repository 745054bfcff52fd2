//! One DNS question, `IN SRV <name>`, asked of the host's nameservers and
//! its answer read: the small, bounded part of a stub resolver that
//! `pkg+https://` needs (RFC 1035's message format, RFC 2782's SRV data).
//!
//! Bounded: one question, answers of at most 512 bytes over UDP, or
//! 65,535 over TCP when the UDP answer says it was cut (TC); at most
//! [`MAX_RECORDS`] records kept; a name's compression pointers followed at
//! most `MAX_JUMPS` times and names no longer than 255 bytes; each
//! server given its timeout, each round of servers its attempts. An
//! answer whose ID or question is not ours is ignored (an off-path
//! forger must guess both), and a malformed one is no answer.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

/// A SRV record's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvRecord {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// The host to ask, without the final dot (`.` alone: no service).
    pub target: String,
}

/// The most records one answer gives.
pub const MAX_RECORDS: usize = 64;
/// The most compression pointers followed in one name.
const MAX_JUMPS: usize = 32;
const TYPE_SRV: u16 = 33;
const CLASS_IN: u16 = 1;

/// Asks each of `servers` in turn, `attempts` rounds, each `timeout`
/// long, for the SRV records of `name`. `Ok(vec![])`: a server answered
/// that there are none (NXDOMAIN or no SRV data).
pub fn query_srv(
    name: &str,
    servers: &[SocketAddr],
    timeout: Duration,
    attempts: u32,
) -> io::Result<Vec<SrvRecord>> {
    let question = encode_name(name)?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no nameserver to ask");
    for _ in 0..attempts.max(1) {
        for server in servers {
            let id = fastrand::u16(..);
            let query = message(id, &question);
            match ask_udp(*server, &query, timeout).and_then(|answer| {
                if answer.len() >= 4 && answer[2] & 0x02 != 0 {
                    // Cut: the whole answer over TCP.
                    ask_tcp(*server, &query, timeout)
                } else {
                    Ok(answer)
                }
            }) {
                Ok(answer) => match parse(&answer, id, &question) {
                    Ok(records) => return Ok(records),
                    Err(e) => last = e,
                },
                Err(e) => last = e,
            }
        }
    }
    Err(last)
}

/// `name` in wire form: length-prefixed labels, ending with the root.
fn encode_name(name: &str) -> io::Result<Vec<u8>> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{name}: {why}"));
    let mut out = Vec::with_capacity(name.len() + 2);
    for label in name.trim_end_matches('.').split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err(bad("a label is empty or longer than 63 bytes"));
        }
        out.push(label.len() as u8);
        out.extend_from_slice(label.as_bytes());
    }
    out.push(0);
    if out.len() > 255 {
        return Err(bad("longer than 255 bytes"));
    }
    Ok(out)
}

/// A query: header (recursion desired, one question), the question.
fn message(id: u16, question: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(12 + question.len() + 4);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(question);
    m.extend_from_slice(&TYPE_SRV.to_be_bytes());
    m.extend_from_slice(&CLASS_IN.to_be_bytes());
    m
}

fn ask_udp(server: SocketAddr, query: &[u8], timeout: Duration) -> io::Result<Vec<u8>> {
    let local: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    let socket = UdpSocket::bind(local)?;
    socket.connect(server)?;
    socket.send(query)?;
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 512];
    loop {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "no answer"))?;
        socket.set_read_timeout(Some(left))?;
        let n = socket.recv(&mut buf)?;
        // Someone else's datagram (another ID) is not the answer: wait on.
        if n >= 2 && buf[..2] == query[..2] {
            return Ok(buf[..n].to_vec());
        }
    }
}

fn ask_tcp(server: SocketAddr, query: &[u8], timeout: Duration) -> io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&server, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut framed = (query.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(query);
    stream.write_all(&framed)?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len)?;
    let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut answer)?;
    Ok(answer)
}

fn malformed(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("DNS answer: {why}"))
}

/// The SRV records of an answer to query `id` for `question`.
fn parse(m: &[u8], id: u16, question: &[u8]) -> io::Result<Vec<SrvRecord>> {
    if m.len() < 12 {
        return Err(malformed("shorter than a header"));
    }
    let word = |at: usize| u16::from_be_bytes([m[at], m[at + 1]]);
    if word(0) != id || m[2] & 0x80 == 0 {
        return Err(malformed("not the answer to this query"));
    }
    match m[3] & 0x0f {
        0 => {}
        3 => return Ok(Vec::new()), // NXDOMAIN: no such name, no records
        _ => return Err(malformed("the server failed or refused")),
    }
    let (qd, an) = (word(4), usize::from(word(6)));
    if qd != 1 {
        return Err(malformed("not one question"));
    }
    let mut at = 12;
    let (asked, next) = read_name(m, at)?;
    let end = next + 4;
    if end > m.len()
        || !asked.eq_ignore_ascii_case(&decode_question(question))
        || m[next..end] != [0, TYPE_SRV as u8, 0, CLASS_IN as u8]
    {
        return Err(malformed("another question"));
    }
    at = end;
    let mut records = Vec::new();
    for _ in 0..an {
        let (_, next) = read_name(m, at)?;
        if next + 10 > m.len() {
            return Err(malformed("a record is cut"));
        }
        let (rtype, class) = (word(next), word(next + 2));
        let rdlen = usize::from(word(next + 8));
        let data = next + 10;
        if data + rdlen > m.len() {
            return Err(malformed("a record's data is cut"));
        }
        if rtype == TYPE_SRV && class == CLASS_IN {
            if rdlen < 7 {
                return Err(malformed("a SRV record too short"));
            }
            let (target, _) = read_name(m, data + 6)?;
            if records.len() < MAX_RECORDS {
                records.push(SrvRecord {
                    priority: word(data),
                    weight: word(data + 2),
                    port: word(data + 4),
                    target,
                });
            }
        }
        at = data + rdlen;
    }
    Ok(records)
}

/// The dotted form of a wire-form question name.
fn decode_question(q: &[u8]) -> String {
    read_name(q, 0).map(|(n, _)| n).unwrap_or_default()
}

/// The name at `at` in `m` (dotted, no final dot; `.` for the root) and
/// where the bytes after it start.
fn read_name(m: &[u8], mut at: usize) -> io::Result<(String, usize)> {
    let mut name = String::new();
    let mut after = None;
    let mut jumps = 0;
    loop {
        let len = *m.get(at).ok_or_else(|| malformed("a name is cut"))?;
        match len & 0xc0 {
            0x00 if len == 0 => break,
            0x00 => {
                let label = m
                    .get(at + 1..at + 1 + usize::from(len))
                    .ok_or_else(|| malformed("a name is cut"))?;
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(&String::from_utf8_lossy(label));
                if name.len() > 255 {
                    return Err(malformed("a name longer than 255 bytes"));
                }
                at += 1 + usize::from(len);
            }
            0xc0 => {
                let low = *m.get(at + 1).ok_or_else(|| malformed("a pointer is cut"))?;
                after.get_or_insert(at + 2);
                jumps += 1;
                if jumps > MAX_JUMPS {
                    return Err(malformed("a name's pointers loop"));
                }
                at = (usize::from(len & 0x3f) << 8) | usize::from(low);
            }
            _ => return Err(malformed("an unknown label type")),
        }
    }
    let after = after.unwrap_or(at + 1);
    if name.is_empty() {
        name.push('.');
    }
    Ok((name, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer to `id` with SRV records, the target of the second one
    /// compressed to a pointer at the first's.
    fn answer(id: u16, q: &[u8]) -> Vec<u8> {
        let mut m = id.to_be_bytes().to_vec();
        m.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0]);
        m.extend_from_slice(q);
        m.extend_from_slice(&[0, 33, 0, 1]);
        // 1: name = pointer to the question (offset 12)
        m.extend_from_slice(&[0xc0, 12, 0, 33, 0, 1, 0, 0, 0, 60]);
        let target = encode_name("m1.example.org").unwrap();
        m.extend_from_slice(&((6 + target.len()) as u16).to_be_bytes());
        let t1 = m.len() + 6;
        m.extend_from_slice(&[0, 10, 0, 5, 0x1f, 0x90]);
        m.extend_from_slice(&target);
        // 2: "m2" then a pointer to "example.org" inside the first target
        m.extend_from_slice(&[0xc0, 12, 0, 33, 0, 1, 0, 0, 0, 60, 0, 11]);
        m.extend_from_slice(&[0, 20, 0, 0, 0, 80, 2, b'm', b'2', 0xc0, (t1 + 3) as u8]);
        m
    }

    #[test]
    fn reads_records_with_compressed_names() {
        let q = encode_name("_https._tcp.example.org").unwrap();
        let got = parse(&answer(7, &q), 7, &q).unwrap();
        assert_eq!(
            got,
            vec![
                SrvRecord {
                    priority: 10,
                    weight: 5,
                    port: 8080,
                    target: "m1.example.org".into()
                },
                SrvRecord {
                    priority: 20,
                    weight: 0,
                    port: 80,
                    target: "m2.example.org".into()
                },
            ]
        );
        assert!(parse(&answer(7, &q), 8, &q).is_err(), "another ID");
        let other = encode_name("_http._tcp.example.org").unwrap();
        assert!(
            parse(&answer(7, &q), 7, &other).is_err(),
            "another question"
        );
    }

    #[test]
    fn malformed_answers_are_refused_not_followed() {
        let q = encode_name("a.b").unwrap();
        let full = answer(1, &q);
        for cut in [0, 5, 12, 20, full.len() - 3] {
            assert!(parse(&full[..cut], 1, &q).is_err(), "cut at {cut}");
        }
        // A pointer to itself.
        let mut looped = 1u16.to_be_bytes().to_vec();
        looped.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12]);
        let e = parse(&looped, 1, &q).unwrap_err().to_string();
        assert!(e.contains("loop"), "{e}");
        assert!(encode_name(&"x".repeat(64)).is_err());
    }
}
