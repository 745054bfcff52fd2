//! A fault-injecting HTTP proxy to put in front of a registry.
//!
//! It is a raw TCP proxy that understands just enough HTTP/1.1 to do its
//! job: it forces `Connection: close` on both sides, so every connection
//! carries exactly one request and its response; that lets it read each
//! request line (for the request log), and cut, corrupt, slow down or
//! replace one response without parsing bodies. Clients see a real
//! socket: a reset is a TCP RST (SO_LINGER 0), a truncation a FIN before
//! `Content-Length` bytes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What to do to a response.
#[derive(Clone, Debug)]
pub enum FaultKind {
    /// Answer with this status (and headers) instead of asking the registry.
    Status(u16, Vec<(&'static str, String)>),
    /// Send the head and half the body, then reset the connection.
    ResetMidBody,
    /// Send the head and half the body, then close cleanly.
    TruncateBody,
    /// Hang up with a TCP reset before answering (for any method: an
    /// upload then breaks off in the middle).
    Reset,
    /// Send the whole body with one byte flipped in its middle.
    CorruptBody,
    /// Send the body in 16 KiB pieces with this pause before each.
    Slow(Duration),
    /// Send this request (`METHOD`, path) to the registry first, then
    /// forward the client's: e.g. a DELETE of a blob just before the
    /// manifest that names it. The log gets `UPSTREAM METHOD PATH -> STATUS`.
    UpstreamFirst(&'static str, String),
    /// Add this `WWW-Authenticate` value to a 401 from the registry:
    /// before the registry's own challenges (`true`) or after them.
    ExtraChallenge(String, bool),
    /// Send the head and this many bytes of the body, then hold the rest
    /// back until the condition holds (at most 20 s), then send it;
    /// whether the condition held in time is recorded ([`Proxy::held`]).
    HoldUntil(usize, Condition),
    /// Send the head and the body up to this byte of the blob (counted
    /// from the blob's start, also in a `206` answer to a `Range`
    /// request), then close cleanly: a blob that always breaks off there.
    CutAt(u64),
    /// Stream the body up to this byte of the blob (counted as in
    /// `CutAt`), then send nothing more and keep the connection open until
    /// the proxy stops: a transfer stalled at a known byte, for a test to
    /// kill its client there. Streamed, never held whole.
    StallAt(u64),
}

/// A condition a held response waits for (see [`FaultKind::HoldUntil`]).
#[derive(Clone)]
pub struct Condition(pub Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Condition")
    }
}

/// A fault for the first `times` requests with this method whose path
/// contains `path` (body faults apply only to responses with a body).
#[derive(Clone, Debug)]
pub struct Fault {
    pub method: &'static str,
    pub path: &'static str,
    pub times: usize,
    pub kind: FaultKind,
}

impl Fault {
    pub fn new(method: &'static str, path: &'static str, times: usize, kind: FaultKind) -> Fault {
        Fault {
            method,
            path,
            times,
            kind,
        }
    }
}

/// Holds requests back so that how many a client keeps open at once
/// shows: each request with this method whose path contains `path` waits
/// (before it is forwarded) until `release_at` of them are in flight or
/// `wait` has passed. The peak number in flight is recorded.
#[derive(Clone, Debug)]
pub struct Gate {
    pub method: &'static str,
    pub path: &'static str,
    pub release_at: usize,
    pub wait: Duration,
}

#[derive(Default)]
struct State {
    faults: Vec<Fault>,
    gate: Option<Gate>,
    /// Gated requests in flight now, and the most there ever were.
    in_flight: usize,
    peak_in_flight: usize,
    /// `METHOD PATH` of every request, in arrival order.
    log: Vec<String>,
    /// The whole head (request line and headers) of every request, in
    /// arrival order.
    heads: Vec<String>,
    /// Path and bytes of body sent of every response cut short
    /// (`ResetMidBody`, `TruncateBody`), in order.
    cuts: Vec<(String, usize)>,
    /// Path of every held response (`HoldUntil`) and whether its
    /// condition held before the wait ran out, in order.
    held: Vec<(String, bool)>,
    /// How many times a fault was applied.
    applied: usize,
    /// `METHOD PATH SCHEME` of every request (`-`: no `Authorization`).
    auth: Vec<String>,
    /// Body bytes sent to clients, by request path, since the last
    /// [`Proxy::clear_served`].
    served: std::collections::HashMap<String, u64>,
    /// Connections that did not start with an HTTP request (a TLS
    /// ClientHello): hung up on at once, as a plain-HTTP server would.
    not_http: usize,
}

pub struct Proxy {
    pub port: u16,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `upstream`.
    pub fn start(upstream: u16, faults: Vec<Fault>) -> Proxy {
        Proxy::start_with(upstream, faults, None)
    }

    /// As [`start`](Proxy::start), holding back what `gate` matches.
    pub fn start_gated(upstream: u16, gate: Gate) -> Proxy {
        Proxy::start_with(upstream, Vec::new(), Some(gate))
    }

    fn start_with(upstream: u16, faults: Vec<Fault>, gate: Option<Gate>) -> Proxy {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let port = std_listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            faults,
            gate,
            ..State::default()
        }));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let st = state.clone();
        let upstream: SocketAddr = ([127, 0, 0, 1], upstream).into();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(std_listener).unwrap();
                let accept = async {
                    loop {
                        let Ok((client, _)) = listener.accept().await else {
                            continue;
                        };
                        let st = st.clone();
                        tokio::spawn(async move {
                            let _ = handle(client, upstream, st).await;
                        });
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = rx => {}
                }
            });
            // Dropping the runtime cancels every connection still open.
        });
        Proxy {
            port,
            state,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    /// `METHOD PATH` of every request so far.
    pub fn requests(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }

    /// Requests that upload something (blob uploads and manifest puts).
    pub fn uploads(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.starts_with("PUT ") || r.starts_with("PATCH ") || r.starts_with("POST "))
            .collect()
    }

    /// The whole head of every request so far.
    pub fn heads(&self) -> Vec<String> {
        self.state.lock().unwrap().heads.clone()
    }

    /// Path and body bytes sent of every response cut short so far.
    pub fn cuts(&self) -> Vec<(String, usize)> {
        self.state.lock().unwrap().cuts.clone()
    }

    /// Path of every response held back (`HoldUntil`) and whether its
    /// condition held before the wait ran out.
    pub fn held(&self) -> Vec<(String, bool)> {
        self.state.lock().unwrap().held.clone()
    }

    /// How many connections did not start with an HTTP request (a client
    /// trying TLS first on this plain-HTTP port).
    pub fn not_http(&self) -> usize {
        self.state.lock().unwrap().not_http
    }

    /// The most gated requests that were in flight at once.
    pub fn peak_in_flight(&self) -> usize {
        self.state.lock().unwrap().peak_in_flight
    }

    pub fn clear_log(&self) {
        let mut st = self.state.lock().unwrap();
        st.log.clear();
        st.heads.clear();
        st.auth.clear();
    }

    /// `METHOD PATH SCHEME` of every request so far: the scheme of its
    /// `Authorization` header (`Basic`, `Bearer`), or `-`.
    pub fn authorizations(&self) -> Vec<String> {
        self.state.lock().unwrap().auth.clone()
    }

    /// How many responses were tampered with.
    pub fn applied(&self) -> usize {
        self.state.lock().unwrap().applied
    }

    /// Body bytes sent to clients, summed over every request whose path
    /// contains `path`, since the last [`Proxy::clear_served`].
    pub fn served(&self, path: &str) -> u64 {
        let st = self.state.lock().unwrap();
        st.served
            .iter()
            .filter(|(p, _)| p.contains(path))
            .map(|(_, n)| n)
            .sum()
    }

    pub fn clear_served(&self) {
        self.state.lock().unwrap().served.clear();
    }

    /// Drops the faults not yet used up.
    pub fn clear_faults(&self) {
        self.state.lock().unwrap().faults.clear();
    }

    /// Adds faults (each applied to the next requests that match).
    pub fn add_faults(&self, faults: Vec<Fault>) {
        self.state.lock().unwrap().faults.extend(faults);
    }
}

/// Counts `n` body bytes sent for `path`.
fn count(state: &Arc<Mutex<State>>, path: &str, n: usize) {
    *state
        .lock()
        .unwrap()
        .served
        .entry(path.to_string())
        .or_default() += n as u64;
}

/// Where an answer starts in the blob: 0, or a `206`'s range start.
fn answer_start(rhead: &str) -> u64 {
    header(rhead, "content-range")
        .and_then(|v| {
            let v = v.strip_prefix("bytes ")?;
            v.split('-').next()?.trim().parse::<u64>().ok()
        })
        .unwrap_or(0)
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One gated request in flight; leaving the count when dropped.
struct InFlight(Arc<Mutex<State>>);

impl InFlight {
    /// Counts this request in and holds it as its gate says.
    async fn enter(state: &Arc<Mutex<State>>, gate: &Gate) -> InFlight {
        {
            let mut st = state.lock().unwrap();
            st.in_flight += 1;
            st.peak_in_flight = st.peak_in_flight.max(st.in_flight);
        }
        let until = tokio::time::Instant::now() + gate.wait;
        while tokio::time::Instant::now() < until
            && state.lock().unwrap().in_flight < gate.release_at
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        InFlight(state.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().unwrap().in_flight -= 1;
    }
}

/// What [`read_head`] says of a connection that does not speak HTTP.
const NOT_HTTP: &str = "not HTTP";

/// Reads up to the end of an HTTP head; returns (head, bytes after it).
async fn read_head(s: &mut (impl AsyncReadExt + Unpin)) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(i + 4);
            return Ok((String::from_utf8_lossy(&buf).into_owned(), rest));
        }
        if buf.len() > 1 << 16 {
            return Err(std::io::Error::other("head too large"));
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        // Not HTTP (a TLS ClientHello starts with 0x16): hang up at once,
        // as a plain-HTTP server would, so a client probing for TLS moves on.
        if !buf[0].is_ascii_uppercase() {
            return Err(std::io::Error::other(NOT_HTTP));
        }
    }
}

/// The head with any `Connection` header replaced by `Connection: close`.
fn force_close(head: &str) -> String {
    let mut out = String::new();
    for line in head.trim_end_matches("\r\n").split("\r\n") {
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("connection:") || lower.starts_with("keep-alive:") {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

fn header(head: &str, name: &str) -> Option<String> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// `head` with `WWW-Authenticate: value` before its first challenge
/// (`first`) or after its last.
fn add_challenge(head: &str, value: &str, first: bool) -> String {
    let mut lines: Vec<String> = head
        .trim_end_matches("\r\n")
        .split("\r\n")
        .map(str::to_string)
        .collect();
    let is_challenge = |l: &String| l.to_ascii_lowercase().starts_with("www-authenticate:");
    let at = if first {
        lines.iter().position(is_challenge)
    } else {
        lines.iter().rposition(is_challenge).map(|i| i + 1)
    }
    .unwrap_or(lines.len());
    lines.insert(at, format!("WWW-Authenticate: {value}"));
    lines.join("\r\n") + "\r\n\r\n"
}

async fn handle(
    mut client: TcpStream,
    upstream: SocketAddr,
    state: Arc<Mutex<State>>,
) -> std::io::Result<()> {
    let (head, rest) = match read_head(&mut client).await {
        Ok(read) => read,
        Err(e) => {
            if e.to_string() == NOT_HTTP {
                state.lock().unwrap().not_http += 1;
            }
            return Err(e);
        }
    };
    let mut words = head.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("").to_string();
    let (fault, gate) = {
        let mut st = state.lock().unwrap();
        st.log.push(format!("{method} {path}"));
        st.heads.push(head.clone());
        let scheme = header(&head, "authorization")
            .and_then(|v| v.split_whitespace().next().map(str::to_string))
            .unwrap_or_else(|| "-".into());
        st.auth.push(format!("{method} {path} {scheme}"));
        let f = st
            .faults
            .iter_mut()
            .find(|f| f.times > 0 && f.method == method && path.contains(f.path));
        let fault = f.map(|f| {
            f.times -= 1;
            f.kind.clone()
        });
        let gate = st
            .gate
            .clone()
            .filter(|g| g.method == method && path.contains(g.path));
        (fault, gate)
    };
    // Held until the response is sent (the end of this function).
    let _in_flight = match &gate {
        Some(g) => Some(InFlight::enter(&state, g).await),
        None => None,
    };
    if let Some(FaultKind::Status(code, headers)) = &fault {
        state.lock().unwrap().applied += 1;
        let body =
            format!("{{\"errors\":[{{\"code\":\"UNKNOWN\",\"message\":\"injected {code}\"}}]}}");
        let mut resp = format!(
            "HTTP/1.1 {code} Injected\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
            body.len()
        );
        for (k, v) in headers {
            resp.push_str(&format!("{k}: {v}\r\n"));
        }
        resp.push_str("\r\n");
        resp.push_str(&body);
        client.write_all(resp.as_bytes()).await?;
        client.shutdown().await?;
        return Ok(());
    }

    if let Some(FaultKind::UpstreamFirst(m, p)) = &fault {
        let mut up = TcpStream::connect(upstream).await?;
        up.write_all(
            format!("{m} {p} HTTP/1.1\r\nHost: {upstream}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let (rhead, _) = read_head(&mut up).await?;
        let status = rhead.split_whitespace().nth(1).unwrap_or("?").to_string();
        let mut st = state.lock().unwrap();
        st.applied += 1;
        st.log.push(format!("UPSTREAM {m} {p} -> {status}"));
    }
    if let Some(FaultKind::Reset) = &fault {
        state.lock().unwrap().applied += 1;
        // Take part of an upload first, so it breaks off in the middle.
        let mut sink = [0u8; 65536];
        let _ = tokio::time::timeout(Duration::from_millis(200), client.read(&mut sink)).await;
        client.set_zero_linger()?;
        return Ok(());
    }
    if matches!(fault, Some(FaultKind::ResetMidBody)) {
        // Closing this socket will then send a RST, not a FIN.
        client.set_zero_linger()?;
    }
    let mut up = TcpStream::connect(upstream).await?;
    up.write_all(force_close(&head).as_bytes()).await?;
    up.write_all(&rest).await?;
    let (mut up_r, mut up_w) = up.into_split();
    let (mut cl_r, mut cl_w) = client.into_split();
    // The request body (if any) flows on while the response is read.
    let upload = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut cl_r, &mut up_w).await;
        let _ = up_w.shutdown().await;
        cl_r
    });

    let (rhead, rrest) = read_head(&mut up_r).await?;
    let status: u16 = rhead
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let length: Option<usize> = header(&rhead, "content-length").and_then(|v| v.parse().ok());
    let rhead = match &fault {
        Some(FaultKind::ExtraChallenge(value, first)) if status == 401 => {
            state.lock().unwrap().applied += 1;
            add_challenge(&rhead, value, *first)
        }
        _ => rhead,
    };
    let body_fault = match (&fault, status, length) {
        (Some(FaultKind::UpstreamFirst(..) | FaultKind::ExtraChallenge(..)), ..) => None,
        (Some(k), 200 | 206, Some(n)) if n >= 2 && method == "GET" => Some(k.clone()),
        _ => None,
    };
    cl_w.write_all(force_close(&rhead).as_bytes()).await?;
    // Bytes still to send before stalling (`StallAt`), else all of them.
    let mut until_stall = match &body_fault {
        Some(FaultKind::StallAt(at)) => {
            state.lock().unwrap().applied += 1;
            Some(at.saturating_sub(answer_start(&rhead)))
        }
        Some(_) => None,
        None => Some(u64::MAX),
    };
    if let Some(left) = until_stall.as_mut() {
        // Streamed and counted; a stall holds the connection open.
        let mut piece = rrest;
        let mut buf = vec![0u8; 65536];
        loop {
            let n = (piece.len() as u64).min(*left) as usize;
            cl_w.write_all(&piece[..n]).await?;
            count(&state, &path, n);
            *left -= n as u64;
            if *left == 0 || n < piece.len() {
                cl_w.flush().await?;
                std::future::pending::<()>().await;
            }
            let k = up_r.read(&mut buf).await?;
            if k == 0 {
                break;
            }
            piece = buf[..k].to_vec();
        }
        cl_w.shutdown().await?;
        upload.abort();
        return Ok(());
    }
    let Some(kind) = body_fault else {
        unreachable!("sent above")
    };
    state.lock().unwrap().applied += 1;
    let n = length.unwrap();
    let mut body = rrest;
    body.reserve(n.saturating_sub(body.len()));
    // Bodies here are test blobs of a few MiB at most: read it whole, then
    // misbehave precisely.
    while body.len() < n {
        let mut chunk = vec![0u8; 65536];
        let k = up_r.read(&mut chunk).await?;
        if k == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..k]);
    }
    match kind {
        FaultKind::ResetMidBody | FaultKind::TruncateBody => {
            cl_w.write_all(&body[..n / 2]).await?;
            cl_w.flush().await?;
            state.lock().unwrap().cuts.push((path.clone(), n / 2));
            tokio::time::sleep(Duration::from_millis(50)).await;
            if matches!(kind, FaultKind::TruncateBody) {
                cl_w.shutdown().await?;
            }
            upload.abort();
            let _ = upload.await;
            drop(cl_w);
        }
        FaultKind::CorruptBody => {
            body[n / 2] ^= 0xff;
            cl_w.write_all(&body).await?;
            cl_w.shutdown().await?;
            upload.abort();
        }
        FaultKind::HoldUntil(first, Condition(until)) => {
            let first = first.min(n);
            cl_w.write_all(&body[..first]).await?;
            cl_w.flush().await?;
            let start = tokio::time::Instant::now();
            while !until() && start.elapsed() < Duration::from_secs(20) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            state.lock().unwrap().held.push((path.clone(), until()));
            cl_w.write_all(&body[first..]).await?;
            cl_w.shutdown().await?;
            upload.abort();
        }
        FaultKind::CutAt(at) => {
            let from = answer_start(&rhead);
            let keep = (at.saturating_sub(from) as usize).min(n);
            cl_w.write_all(&body[..keep]).await?;
            count(&state, &path, keep);
            cl_w.flush().await?;
            state.lock().unwrap().cuts.push((path.clone(), keep));
            cl_w.shutdown().await?;
            upload.abort();
        }
        FaultKind::Slow(pause) => {
            for piece in body.chunks(16384) {
                tokio::time::sleep(pause).await;
                cl_w.write_all(piece).await?;
            }
            cl_w.shutdown().await?;
            upload.abort();
        }
        FaultKind::Status(..)
        | FaultKind::StallAt(..)
        | FaultKind::Reset
        | FaultKind::UpstreamFirst(..)
        | FaultKind::ExtraChallenge(..) => {
            unreachable!("answered above")
        }
    }
    Ok(())
}
