//! The release mirror's HTTP server: static files from a directory on
//! 127.0.0.1, every request line recorded, and the faults the download
//! tests need (a body held back until a file appears: `NAME.gate`).

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest as _, Sha256};

/// A static-file HTTP/1.1 server on 127.0.0.1 (a free port) that records
/// every request line. Stopped and joined on drop.
pub(super) struct Server {
    pub(super) url: String,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub(super) fn start(dir: &Path) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (dir, log2, stop2) = (dir.to_path_buf(), log.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => serve(s, &dir, &log2),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
        });
        Server {
            url,
            log,
            stop,
            thread: Some(thread),
        }
    }

    pub(super) fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request per connection (`Connection: close`); GET and HEAD; an
/// ETag of the content's sha256.
fn serve(stream: TcpStream, dir: &Path, log: &Mutex<Vec<String>>) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    log.lock().unwrap().push(format!("{method} {path}"));
    let mut out = stream;
    let file = dir.join(path.trim_start_matches('/'));
    let body = if path.contains("..") {
        None
    } else {
        fs::read(&file).ok()
    };
    match body {
        Some(body) => {
            let etag = hex::encode(Sha256::digest(&body));
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: \"{etag}\"\r\nConnection: close\r\n\r\n",
                body.len()
            );
            if method == "GET" {
                send_body(&mut out, &file, &body);
            }
        }
        None => {
            let _ = write!(
                out,
                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    }
    let _ = out.flush();
}

/// Sends `body`, unless a file beside `file` says to misbehave:
/// `<file>.truncate`: only the first half, then the connection closes
/// (the length announced is the whole body's); `<file>.gate` (a directory
/// D, a tab, a path R): the first 64 KiB, then a pause until some
/// `D/*/fs/R` exists (at most 20 s), then the rest; whether it appeared
/// in time is written to `<file>.gate-result` (`seen` or `timeout`).
fn send_body(out: &mut TcpStream, file: &Path, body: &[u8]) {
    let beside = |ext: &str| PathBuf::from(format!("{}.{ext}", file.display()));
    if beside("truncate").exists() {
        let _ = out.write_all(&body[..body.len() / 2]);
        return;
    }
    let Ok(gate) = fs::read_to_string(beside("gate")) else {
        let _ = out.write_all(body);
        return;
    };
    let (dir, rel) = gate.trim_end().split_once('\t').unwrap();
    let first = body.len().min(64 << 10);
    let _ = out.write_all(&body[..first]);
    let _ = out.flush();
    let appeared = || {
        fs::read_dir(dir)
            .into_iter()
            .flatten()
            .any(|e| e.unwrap().path().join("fs").join(rel).exists())
    };
    let start = std::time::Instant::now();
    while !appeared() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let seen = if appeared() { "seen" } else { "timeout" };
    fs::write(beside("gate-result"), seen).unwrap();
    let _ = out.write_all(&body[first..]);
}
