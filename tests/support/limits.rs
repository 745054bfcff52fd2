//! What the limit and secret tests put around jbuild: a scripted HTTP
//! server on 127.0.0.1 that can answer anything (a 50 MB manifest, a body
//! that never ends, silence), and a way to run jbuild and read its peak
//! memory (`wait4`'s `ru_maxrss`).
#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Req {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the server answers one request.
pub enum Answer {
    /// A whole answer; `Content-Length` is added unless `headers` has one.
    Reply {
        status: &'static str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `status` and `headers`, then `prefix` and `len - prefix.len()` more
    /// bytes of `fill`, in 64 KiB writes; `chunked` sends them with chunked
    /// transfer encoding (no length said), else `Content-Length: length`
    /// (which may lie: `Some(n)` says `n`, `None` says `len`).
    Stream {
        status: &'static str,
        headers: Vec<(String, String)>,
        prefix: Vec<u8>,
        fill: u8,
        len: u64,
        chunked: bool,
        length: Option<u64>,
    },
    /// `status` and `headers` (with their `Content-Length`), then `sent`,
    /// then nothing more: the connection stays open and silent.
    StallAfter {
        status: &'static str,
        headers: Vec<(String, String)>,
        sent: Vec<u8>,
    },
    /// Read the request (or a TLS ClientHello), never answer.
    Silent,
    /// `status`, `headers` and an honest `Content-Length`, then `body` one
    /// byte every `every`: a registry that is never silent for long, and
    /// never done.
    Drip {
        status: &'static str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        every: Duration,
    },
}

impl Answer {
    pub fn status(status: &'static str) -> Answer {
        Answer::Reply {
            status,
            headers: vec![],
            body: vec![],
        }
    }
    pub fn json(status: &'static str, body: &[u8]) -> Answer {
        Answer::Reply {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_vec(),
        }
    }
}

type Script = dyn Fn(&Req) -> Answer + Send + Sync;

/// A scripted server; stops (and drops every connection) when dropped.
pub struct Server {
    pub port: u16,
    stop: Arc<AtomicBool>,
    pub seen: Arc<Mutex<Vec<Req>>>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// A plain-HTTP server: a TLS ClientHello gets the connection closed
    /// (as an HTTP server does), so clients fall back to HTTP at once.
    pub fn start(script: impl Fn(&Req) -> Answer + Send + Sync + 'static) -> Server {
        Server::start_with(false, script)
    }

    /// `tls_silent`: a TLS ClientHello is read and never answered (a TLS
    /// handshake that stalls).
    pub fn start_with(
        tls_silent: bool,
        script: impl Fn(&Req) -> Answer + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Mutex<Vec<Req>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let (s, q) = (stop.clone(), seen.clone());
        let accept = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (s, q, script) = (s.clone(), q.clone(), script.clone());
                        conns.push(std::thread::spawn(move || {
                            serve(stream, tls_silent, &s, &q, &*script)
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        Server {
            port,
            stop,
            seen,
            accept: Some(accept),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Req> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Reads a request head; `None` when the peer went away, the server is
/// stopping, or what came is not HTTP (a TLS ClientHello: then silence).
fn read_head(stream: &mut TcpStream, tls_silent: bool, stop: &AtomicBool) -> Option<Req> {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        match stream.read(&mut b) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return None,
        }
        if buf.first() == Some(&0x16) {
            if !tls_silent {
                return None;
            }
            // TLS: hold the connection, say nothing.
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            return None;
        }
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let text = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = text.split("\r\n");
            let mut first = lines.next().unwrap_or("").split(' ');
            let method = first.next().unwrap_or("").to_string();
            let path = first.next().unwrap_or("").to_string();
            let headers = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect();
            return Some(Req {
                method,
                path,
                headers,
            });
        }
    }
}

fn serve(
    mut stream: TcpStream,
    tls_silent: bool,
    stop: &AtomicBool,
    seen: &Mutex<Vec<Req>>,
    script: &Script,
) {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    // One request per connection: every answer says `Connection: close`
    // (request bodies are not read; uploads to this server are not kept).
    let Some(req) = read_head(&mut stream, tls_silent, stop) else {
        return;
    };
    seen.lock().unwrap().push(req.clone());
    let head = |status: &str, headers: &[(String, String)], extra: &str| {
        let mut h = format!("HTTP/1.1 {status}\r\nConnection: close\r\n{extra}");
        for (k, v) in headers {
            h.push_str(&format!("{k}: {v}\r\n"));
        }
        h.push_str("\r\n");
        h.into_bytes()
    };
    let hold = || {
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    match script(&req) {
        Answer::Reply {
            status,
            headers,
            body,
        } => {
            let has_len = headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-length"));
            let extra = if has_len {
                String::new()
            } else {
                format!("Content-Length: {}\r\n", body.len())
            };
            let _ = stream.write_all(&head(status, &headers, &extra));
            let _ = stream.write_all(&body);
        }
        Answer::Stream {
            status,
            headers,
            prefix,
            fill,
            len,
            chunked,
            length,
        } => {
            let extra = if chunked {
                "Transfer-Encoding: chunked\r\n".to_string()
            } else {
                format!("Content-Length: {}\r\n", length.unwrap_or(len))
            };
            if stream.write_all(&head(status, &headers, &extra)).is_err() {
                return;
            }
            let block = vec![fill; 64 * 1024];
            let mut left = len;
            let mut first = Some(prefix);
            while left > 0 && !stop.load(Ordering::Relaxed) {
                let data = match first.take() {
                    Some(p) if !p.is_empty() => p,
                    _ => block[..block.len().min(left as usize)].to_vec(),
                };
                let data = &data[..data.len().min(left as usize)];
                let ok = if chunked {
                    stream
                        .write_all(format!("{:x}\r\n", data.len()).as_bytes())
                        .and_then(|_| stream.write_all(data))
                        .and_then(|_| stream.write_all(b"\r\n"))
                } else {
                    stream.write_all(data)
                };
                if ok.is_err() {
                    return; // the client hung up: what the limits want
                }
                left -= data.len() as u64;
            }
            if chunked {
                let _ = stream.write_all(b"0\r\n\r\n");
            }
        }
        Answer::StallAfter {
            status,
            headers,
            sent,
        } => {
            let _ = stream.write_all(&head(status, &headers, ""));
            let _ = stream.write_all(&sent);
            let _ = stream.flush();
            hold();
        }
        Answer::Silent => hold(),
        Answer::Drip {
            status,
            headers,
            body,
            every,
        } => {
            let extra = format!("Content-Length: {}\r\n", body.len());
            if stream.write_all(&head(status, &headers, &extra)).is_err() {
                return;
            }
            for b in body {
                if stop.load(Ordering::Relaxed) || stream.write_all(&[b]).is_err() {
                    return; // the client hung up: what the limits want
                }
                let _ = stream.flush();
                std::thread::sleep(every);
            }
        }
    }
}

/// What a bounded run of a command did.
pub struct Measured {
    pub output: Output,
    /// Peak resident memory of the process, in KiB (`ru_maxrss`).
    pub max_rss_kib: i64,
    pub elapsed: Duration,
}

impl Measured {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// Everything it printed, for messages.
    pub fn text(&self) -> String {
        format!(
            "exit {:?} after {:.1?}, max RSS {} KiB\nstdout:\n{}\nstderr:\n{}",
            self.output.status.code(),
            self.elapsed,
            self.max_rss_kib,
            self.stdout(),
            self.stderr()
        )
    }
}

/// Runs `cmd` (stdin from `input`) under GNU time, for its peak RSS; a
/// command still running after `limit` is killed (with its process group)
/// and the test fails with what it printed.
///
/// Why GNU time and not `wait4` here: Linux carries a process's RSS high
/// mark across `exec`, so a child forked from this (large, multi-threaded)
/// test process would report the test's own memory; GNU time is small.
pub fn run_measured(cmd: &mut Command, input: &[u8], limit: Duration) -> Measured {
    run_measured_within(cmd, input, limit, None)
}

/// [`run_measured`], with the process's address space held to
/// `max_address_space` bytes (`RLIMIT_AS`): a run that would take the
/// machine's memory (the code a test guards against, run before its fix)
/// fails to allocate instead, and the test fails rather than the machine.
pub fn run_measured_capped(
    cmd: &mut Command,
    input: &[u8],
    limit: Duration,
    max_address_space: u64,
) -> Measured {
    run_measured_within(cmd, input, limit, Some(max_address_space))
}

fn run_measured_within(
    cmd: &mut Command,
    input: &[u8],
    limit: Duration,
    max_address_space: Option<u64>,
) -> Measured {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let (i, o, e, r) = (
        dir.path().join("in"),
        dir.path().join("out"),
        dir.path().join("err"),
        dir.path().join("rss"),
    );
    fs::write(&i, input).unwrap();
    let mut timed = Command::new(TIME);
    timed
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&r)
        .arg(cmd.get_program());
    timed.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => timed.env(k, v),
            None => timed.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        timed.current_dir(d);
    }
    if let Some(max) = max_address_space {
        // SAFETY: between fork and exec only setrlimit(2) is called, which
        // is async-signal-safe and touches no memory of this process.
        unsafe {
            timed.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: max,
                    rlim_max: max,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let started = Instant::now();
    let mut child = timed
        .process_group(0)
        .stdin(fs::File::open(&i).unwrap())
        .stdout(fs::File::create(&o).unwrap())
        .stderr(fs::File::create(&e).unwrap())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {TIME} (Debian package `time`): {err}"));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > limit {
            // SAFETY: a signal to the process group this call made.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "{cmd:?} still running after {limit:?}; stderr so far:\n{}",
                fs::read_to_string(&e).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let rss = fs::read_to_string(&r).unwrap_or_default();
    let max_rss_kib = rss
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .next_back()
        .unwrap_or_else(|| panic!("GNU time wrote no RSS: {rss:?}"));
    Measured {
        output: Output {
            status,
            stdout: fs::read(&o).unwrap(),
            stderr: fs::read(&e).unwrap(),
        },
        max_rss_kib,
        elapsed: started.elapsed(),
    }
}

/// GNU time (Debian package `time`).
pub const TIME: &str = "/usr/bin/time";

/// `cmd` with stdout/stderr null, for threads that only need the status.
pub fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.stdout(Stdio::null()).stderr(Stdio::null())
}
