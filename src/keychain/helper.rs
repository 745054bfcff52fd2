//! docker's credential-helper protocol: `docker-credential-<name> get|store|erase`.
//!
//! - `get`: the server URL on stdin; on stdout
//!   `{"ServerURL": .., "Username": .., "Secret": ..}` (a `Username` of
//!   `<token>` means `Secret` is an identity token). An unknown registry is
//!   a failure whose output is the line `credentials not found in native
//!   keychain`.
//! - `store`: that same JSON object on stdin.
//! - `erase`: the server URL on stdin.
//!
//! A helper's stdout may hold a secret, so it is never shown; its stderr is
//! shown when it fails, with any secret we sent replaced.

use std::ffi::OsString;
use std::io::Write;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::{Credential, KeychainError, Secret};

const TOKEN_USER: &str = "<token>";

#[derive(Serialize, Deserialize)]
struct Payload {
    #[serde(rename = "ServerURL", default)]
    server_url: String,
    #[serde(rename = "Username", default)]
    username: String,
    #[serde(rename = "Secret", default)]
    secret: String,
}

struct Outcome {
    ok: bool,
    stdout: Vec<u8>,
    stderr: String,
}

fn call(
    program: &str,
    action: &str,
    input: &[u8],
    path: Option<&OsString>,
    secret: Option<&str>,
) -> Result<Outcome, KeychainError> {
    let fail = |message: String| KeychainError::Helper {
        program: program.to_string(),
        message,
    };
    let mut cmd = Command::new(program);
    cmd.arg(action)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    // A helper written a moment ago may still be open for writing in a
    // child forked by another thread (ETXTBSY); that passes at once.
    let mut spawned = cmd.spawn();
    for _ in 0..20 {
        match &spawned {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10));
                spawned = cmd.spawn();
            }
            _ => break,
        }
    }
    let mut child = spawned.map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            fail("is not installed (not found in $PATH)\n  install it, or remove `credsStore`/`credHelpers` from the docker config".into())
        } else {
            fail(format!("cannot be started: {e}"))
        }
    })?;
    // A helper that exits without reading its input closes the pipe; its
    // exit status then says what happened.
    let _ = child.stdin.take().expect("piped").write_all(input);
    let out = child
        .wait_with_output()
        .map_err(|e| fail(format!("{action}: {e}")))?;
    // What is shown is cut to 2000 bytes below; scrubbing reads a bit more.
    let head = &out.stderr[..out.stderr.len().min(16 * 1024)];
    let mut stderr = String::from_utf8_lossy(head).trim().to_string();
    if let Some(s) = secret.filter(|s| !s.is_empty()) {
        // As sent (in JSON), and in every other form it may be echoed in.
        stderr = stderr.replace(s, super::redact::REDACTED);
        stderr = super::redact::replace_all(&stderr, &super::redact::forms(None, s));
        // A helper may print it mangled (unescaped, cut): every long
        // enough piece of it goes too.
        if s.chars().count() >= 8 {
            stderr = super::redact::replace_fragments(&stderr, s, 8);
        }
    }
    stderr = super::redact::scrub(&stderr);
    if stderr.len() > 2000 {
        let mut cut = 2000;
        while !stderr.is_char_boundary(cut) {
            cut -= 1;
        }
        stderr.truncate(cut);
        stderr.push_str(" ...");
    }
    Ok(Outcome {
        ok: out.status.success(),
        stdout: out.stdout,
        stderr,
    })
}

/// The protocol's one answer for "no credentials for that server": a
/// failed call whose output is exactly this line (docker-credential-helpers'
/// `errCredentialsNotFoundMessage`, compared whole as its client does). It
/// is the protocol's code, not an error's wording.
const NOT_FOUND: &str = "credentials not found in native keychain";

fn not_found(o: &Outcome) -> bool {
    String::from_utf8_lossy(&o.stdout).trim() == NOT_FOUND || o.stderr.trim() == NOT_FOUND
}

fn failure(program: &str, action: &str, o: &Outcome) -> KeychainError {
    let detail = if o.stderr.is_empty() {
        "(it printed nothing on stderr)".to_string()
    } else {
        o.stderr.clone()
    };
    KeychainError::Helper {
        program: program.to_string(),
        message: format!("failed to {action} credentials: {detail}"),
    }
}

pub fn get(
    program: &str,
    server_url: &str,
    path: Option<&OsString>,
) -> Result<Option<Credential>, KeychainError> {
    let o = call(program, "get", server_url.as_bytes(), path, None)?;
    if !o.ok {
        return if not_found(&o) {
            Ok(None)
        } else {
            Err(failure(program, "get", &o))
        };
    }
    let p: Payload = serde_json::from_slice(&o.stdout).map_err(|e| KeychainError::Helper {
        program: program.to_string(),
        // Not the output itself: it may hold the secret.
        message: format!("answered `get` with output that is not its JSON protocol ({e})"),
    })?;
    if p.secret.is_empty() {
        return Ok(None);
    }
    Ok(Some(if p.username == TOKEN_USER {
        Credential::IdentityToken(Secret::new(p.secret))
    } else {
        Credential::Basic {
            username: p.username,
            password: Secret::new(p.secret),
        }
    }))
}

pub fn store(
    program: &str,
    server_url: &str,
    cred: &Credential,
    path: Option<&OsString>,
) -> Result<(), KeychainError> {
    let payload = match cred {
        Credential::Basic { username, password } => Payload {
            server_url: server_url.into(),
            username: username.clone(),
            secret: password.expose().into(),
        },
        Credential::IdentityToken(t) => Payload {
            server_url: server_url.into(),
            username: TOKEN_USER.into(),
            secret: t.expose().into(),
        },
    };
    let input = serde_json::to_vec(&payload).expect("serialises");
    let o = call(program, "store", &input, path, Some(cred.secret()))?;
    if o.ok {
        Ok(())
    } else {
        Err(failure(program, "store", &o))
    }
}

pub fn erase(
    program: &str,
    server_url: &str,
    path: Option<&OsString>,
) -> Result<bool, KeychainError> {
    let o = call(program, "erase", server_url.as_bytes(), path, None)?;
    if o.ok {
        Ok(true)
    } else if not_found(&o) {
        Ok(false)
    } else {
        Err(failure(program, "erase", &o))
    }
}
