//! A bearer-token issuer, as Distribution's `auth: token` expects one
//! (docker's token spec): `GET REALM?service=S&scope=repository:NAME:ACTIONS`
//! with basic auth answers `{"token": JWT}`. The JWT is ES256, signed with
//! a key made here, and carries that key's self-signed certificate in its
//! `x5c` header; the registry trusts the certificate through
//! `rootcertbundle`.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use rcgen::{CertificateParams, DnType, KeyPair};

pub const SERVICE: &str = "jbuild-registry";
pub const ISSUER: &str = "jbuild-test-issuer";

pub struct TokenServer {
    pub port: u16,
    /// The certificate bundle to give the registry.
    pub bundle: PathBuf,
    /// Every request's path and query, in order.
    pub requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Issuer {
    key: jsonwebtoken::EncodingKey,
    x5c: String,
    user: String,
    password: String,
}

impl TokenServer {
    /// Issues tokens to `user` with `password`, for any scope asked.
    pub fn start(dir: &Path, user: &str, password: &str) -> TokenServer {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "jbuild test token signer");
        let cert = params.self_signed(&key).unwrap();
        let bundle = dir.join("token-signer.crt");
        fs::write(&bundle, cert.pem()).unwrap();
        let issuer = Issuer {
            key: jsonwebtoken::EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap(),
            x5c: base64::engine::general_purpose::STANDARD.encode(cert.der()),
            user: user.into(),
            password: password.into(),
        };

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (reqs, st) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let _ = conn.set_nonblocking(false);
                        let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                        let _ = serve(&mut conn, &issuer, &reqs);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        TokenServer {
            port,
            bundle,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub fn realm(&self) -> String {
        format!("http://127.0.0.1:{}/token", self.port)
    }
}

impl Drop for TokenServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(
    conn: &mut std::net::TcpStream,
    issuer: &Issuer,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut chunk)?;
        if n == 0 || buf.len() > 65536 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
    log.lock().unwrap().push(target.clone());
    let auth = head.split("\r\n").find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("authorization")
            .then(|| v.trim().to_string())
    });
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", issuer.user, issuer.password))
    );
    let (status, body) = if auth.as_deref() != Some(expected.as_str()) {
        (
            "401 Unauthorized",
            r#"{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}"#.to_string(),
        )
    } else {
        let token = issue(issuer, &target);
        (
            "200 OK",
            serde_json::json!({"token": token, "access_token": token, "expires_in": 300})
                .to_string(),
        )
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(resp.as_bytes())
}

fn issue(issuer: &Issuer, target: &str) -> String {
    let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    let mut access = Vec::new();
    for (k, v) in query.split('&').filter_map(|kv| kv.split_once('=')) {
        if k != "scope" {
            continue;
        }
        let scope = percent_decode(v);
        // repository:NAME:ACTIONS (NAME may hold no colon, but a port-less
        // path; split from both ends).
        let mut parts = scope.splitn(2, ':');
        let typ = parts.next().unwrap_or("");
        let rest = parts.next().unwrap_or("");
        let Some((name, actions)) = rest.rsplit_once(':') else {
            continue;
        };
        access.push(serde_json::json!({
            "type": typ, "name": name,
            "actions": actions.split(',').collect::<Vec<_>>(),
        }));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = serde_json::json!({
        "iss": ISSUER, "sub": issuer.user, "aud": SERVICE,
        "exp": now + 300, "nbf": now - 10, "iat": now,
        "jti": format!("{now}-{}", access.len()),
        "access": access,
    });
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.x5c = Some(vec![issuer.x5c.clone()]);
    jsonwebtoken::encode(&header, &claims, &issuer.key).unwrap()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
