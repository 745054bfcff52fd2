//! A tiny authoritative DNS server for the tests, written from RFC 1035
//! and RFC 2782 (sharing no code with `src/`): it answers `IN SRV`
//! questions for the names it is given over UDP on 127.0.0.1 (or an
//! address of the caller's), and over TCP on the same port. It can be
//! told to misbehave: send a forged answer (another ID) first, cut its UDP
//! answers (TC set, no records) so the whole one is asked over TCP, or
//! say nothing at all.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// One SRV record: priority, weight, port, target.
pub type Srv = (u16, u16, u16, &'static str);

/// How the server behaves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quirks {
    /// A datagram with another ID before each answer.
    pub forge_first: bool,
    /// UDP answers are cut (TC, no records).
    pub truncate_udp: bool,
    /// No answer at all.
    pub silent: bool,
}

pub struct DnsServer {
    pub addr: SocketAddr,
    /// Questions received (UDP and TCP).
    pub asked: Arc<AtomicUsize>,
    /// TCP questions received.
    pub asked_tcp: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl DnsServer {
    /// Serves `zone` (name, lower case, no final dot → records) on
    /// `bind` (port 0: any free one).
    pub fn start(bind: SocketAddr, zone: BTreeMap<String, Vec<Srv>>, quirks: Quirks) -> DnsServer {
        // A free UDP port may be a TCP port another test holds: with port
        // 0, take another pair (a few tries) rather than fail.
        let mut tries = 0;
        let (udp, tcp) = loop {
            let udp = UdpSocket::bind(bind).expect("bind the DNS server's UDP socket");
            let addr = udp.local_addr().unwrap();
            match TcpListener::bind(addr) {
                Ok(tcp) => break (udp, tcp),
                Err(e) if bind.port() == 0 && tries < 20 => {
                    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
                    tries += 1;
                }
                Err(e) => panic!("bind the DNS server's TCP socket on {addr}: {e}"),
            }
        };
        let addr = udp.local_addr().unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        tcp.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let asked = Arc::new(AtomicUsize::new(0));
        let asked_tcp = Arc::new(AtomicUsize::new(0));
        let zone = Arc::new(zone);
        {
            let (stop, asked, zone) = (stop.clone(), asked.clone(), zone.clone());
            thread::spawn(move || {
                let mut buf = [0u8; 512];
                while !stop.load(Ordering::SeqCst) {
                    let Ok((n, from)) = udp.recv_from(&mut buf) else {
                        continue;
                    };
                    asked.fetch_add(1, Ordering::SeqCst);
                    if quirks.silent {
                        continue;
                    }
                    let Some(reply) = respond(&buf[..n], &zone, quirks.truncate_udp) else {
                        continue;
                    };
                    if quirks.forge_first {
                        let mut forged = reply.clone();
                        forged[0] ^= 0x5a;
                        let _ = udp.send_to(&forged, from);
                    }
                    let _ = udp.send_to(&reply, from);
                }
            });
        }
        {
            let (stop, asked, asked_tcp) = (stop.clone(), asked.clone(), asked_tcp.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok((mut s, _)) = tcp.accept() else {
                        thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    asked.fetch_add(1, Ordering::SeqCst);
                    asked_tcp.fetch_add(1, Ordering::SeqCst);
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut len = [0u8; 2];
                    if s.read_exact(&mut len).is_err() {
                        continue;
                    }
                    let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
                    if s.read_exact(&mut q).is_err() || quirks.silent {
                        continue;
                    }
                    if let Some(reply) = respond(&q, &zone, false) {
                        let mut framed = (reply.len() as u16).to_be_bytes().to_vec();
                        framed.extend_from_slice(&reply);
                        let _ = s.write_all(&framed);
                    }
                }
            });
        }
        DnsServer {
            addr,
            asked,
            asked_tcp,
            stop,
        }
    }
}

/// The answer to query `q`, `None` for what is not a query.
fn respond(q: &[u8], zone: &BTreeMap<String, Vec<Srv>>, cut: bool) -> Option<Vec<u8>> {
    if q.len() < 17 {
        return None;
    }
    // The question's name: labels from byte 12 to the zero byte.
    let mut at = 12;
    let mut labels = Vec::new();
    while q[at] != 0 {
        let len = usize::from(q[at]);
        labels.push(String::from_utf8_lossy(q.get(at + 1..at + 1 + len)?).to_ascii_lowercase());
        at += 1 + len;
    }
    let question = &q[12..at + 5];
    let name = labels.join(".");
    let is_srv = q[at + 1..at + 5] == [0, 33, 0, 1];
    let records = zone.get(&name).filter(|_| is_srv);
    let mut r = q[..2].to_vec();
    let rcode = if zone.contains_key(&name) { 0 } else { 3 };
    r.push(0x84 | if cut { 0x02 } else { 0 } | (q[2] & 0x01));
    r.push(0x80 | rcode);
    let answers: &[Srv] = match records {
        Some(rs) if !cut => rs,
        _ => &[],
    };
    r.extend_from_slice(&[0, 1]);
    r.extend_from_slice(&(answers.len() as u16).to_be_bytes());
    r.extend_from_slice(&[0, 0, 0, 0]);
    r.extend_from_slice(question);
    for (priority, weight, port, target) in answers {
        let mut data = Vec::new();
        data.extend_from_slice(&priority.to_be_bytes());
        data.extend_from_slice(&weight.to_be_bytes());
        data.extend_from_slice(&port.to_be_bytes());
        for label in target.split('.').filter(|l| !l.is_empty()) {
            data.push(label.len() as u8);
            data.extend_from_slice(label.as_bytes());
        }
        data.push(0);
        // The owner name as a pointer to the question (offset 12).
        r.extend_from_slice(&[0xc0, 12, 0, 33, 0, 1, 0, 0, 0x0e, 0x10]);
        r.extend_from_slice(&(data.len() as u16).to_be_bytes());
        r.extend_from_slice(&data);
    }
    Some(r)
}
