//! A canary password, given through every credential source the keychain
//! reads, never reaches jbuild's output: not stdout, not stderr at
//! `RUST_LOG=trace`, not the `--json` events, not a file under
//! `JBUILD_ROOT`, not `inspect`/`history`/`info` — whether the registry
//! accepts it, refuses it, is down, fails TLS, or its token service
//! refuses (and echoes what it was sent).
//!
//! The canary is random per test and holds characters that JSON, URLs and
//! shells escape (`"`, `\`, `&`, `%`, `+`, `/`, space, `:`), so a leak in an
//! escaped form is caught too: the searches are for its random core (which
//! every escaping keeps), for base64 of `user:canary` (HTTP Basic, docker's
//! `auth`) and of the canary alone, and for its hex.

use crate::support::limits as limits_support;
use crate::support::registry as registry_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine;
use limits_support::{run_measured, Answer, Measured, Server};
use registry_support::{htpasswd, image, Options, Registry};

const USER: &str = "canaryuser";

struct Canary {
    /// The random part, kept by every escaping.
    core: String,
    secret: String,
}

impl Canary {
    fn new() -> Canary {
        let mut bytes = [0u8; 12];
        fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
            .unwrap();
        let core = format!("CNRY{}", hex::encode(bytes));
        let secret = format!("{core}\"q\\&%+/ :z");
        Canary { core, secret }
    }

    /// Every form whose presence is a leak, with its name.
    fn needles(&self) -> Vec<(&'static str, Vec<u8>)> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let basic = format!("{USER}:{}", self.secret);
        vec![
            ("the canary", self.core.clone().into_bytes()),
            ("base64(user:canary)", b64.encode(&basic).into_bytes()),
            ("base64url(user:canary)", url.encode(&basic).into_bytes()),
            ("base64(canary)", b64.encode(&self.secret).into_bytes()),
            (
                "base64(canary) unpadded",
                url.encode(&self.secret).into_bytes(),
            ),
            ("hex(canary)", hex::encode(&self.core).into_bytes()),
        ]
    }

    fn assert_absent(&self, what: &str, hay: &[u8]) {
        for (name, needle) in self.needles() {
            // Base64 of a long string: a leak shows most of it; look for
            // the first 24 characters (18 bytes of input).
            let needle = &needle[..needle.len().min(24)];
            if let Some(at) = hay.windows(needle.len()).position(|w| w == needle) {
                let from = at.saturating_sub(200);
                let to = (at + 200).min(hay.len());
                panic!(
                    "{name} leaked into {what}:\n…{}…",
                    String::from_utf8_lossy(&hay[from..to])
                );
            }
        }
    }

    /// No file under `dir` holds the canary.
    fn assert_tree_clean(&self, what: &str, dir: &Path) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                self.assert_tree_clean(what, &e.path());
            } else if t.is_file() {
                let bytes = fs::read(e.path()).unwrap();
                self.assert_absent(&format!("{what}: {}", e.path().display()), &bytes);
            }
        }
    }
}

/// Where the canary comes from.
#[derive(Clone, Copy, Debug)]
enum Source {
    Env,
    AuthJson,
    DockerAuth,
    CredHelpers,
    CredsStore,
}

const SOURCES: [Source; 5] = [
    Source::Env,
    Source::AuthJson,
    Source::DockerAuth,
    Source::CredHelpers,
    Source::CredsStore,
];

/// A docker credential helper, `docker-credential-canary`, in `dir`: `get`
/// prints `answer.json`; `store` keeps its input, or (when `fail-store`
/// exists) prints it to stderr and fails, as a careless helper would.
fn write_helper(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    let script = format!(
        "#!/bin/sh\nd='{}'\ncase \"$1\" in\n\
         get) cat >/dev/null; cat \"$d/answer.json\" ;;\n\
         store) if [ -e \"$d/fail-store\" ]; then echo \"cannot store: $(cat)\" >&2; exit 1; fi; cat > \"$d/stored.json\" ;;\n\
         erase) cat >/dev/null ;;\n\
         esac\n",
        dir.display()
    );
    let path = bin.join("docker-credential-canary");
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// A home for jbuild with the canary put where `source` keeps it, for
/// `host`; returns the extra environment.
fn home_for(source: Source, host: &str, canary: &Canary, home: &Path) -> Vec<(String, String)> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let auth = b64.encode(format!("{USER}:{}", canary.secret));
    let docker = home.join("docker");
    fs::create_dir_all(&docker).unwrap();
    let bin = write_helper(home);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    fs::write(
        home.join("answer.json"),
        serde_json::json!({"ServerURL": host, "Username": USER, "Secret": canary.secret})
            .to_string(),
    )
    .unwrap();
    let mut env = vec![
        ("PATH".to_string(), path),
        ("RUST_LOG".into(), "trace".into()),
    ];
    match source {
        Source::Env => {
            env.push(("JBUILD_REGISTRY_HOST".into(), host.into()));
            env.push(("JBUILD_REGISTRY_USERNAME".into(), USER.into()));
            env.push(("JBUILD_REGISTRY_PASSWORD".into(), canary.secret.clone()));
        }
        Source::AuthJson => {
            let file = home.join("auth.json");
            fs::write(
                &file,
                serde_json::json!({"auths": {host: {"auth": auth}}}).to_string(),
            )
            .unwrap();
            env.push(("REGISTRY_AUTH_FILE".into(), file.display().to_string()));
        }
        Source::DockerAuth => fs::write(
            docker.join("config.json"),
            serde_json::json!({"auths": {host: {"auth": auth}}}).to_string(),
        )
        .unwrap(),
        Source::CredHelpers => fs::write(
            docker.join("config.json"),
            serde_json::json!({"credHelpers": {host: "canary"}}).to_string(),
        )
        .unwrap(),
        Source::CredsStore => fs::write(
            docker.join("config.json"),
            serde_json::json!({"credsStore": "canary"}).to_string(),
        )
        .unwrap(),
    }
    env
}

/// `jbuild --json ARGS` in `home` with `env`, checked for the canary in
/// everything it printed.
fn run(
    home: &Path,
    env: &[(String, String)],
    args: &[&str],
    input: &[u8],
    canary: &Canary,
    what: &str,
) -> Measured {
    let mut cmd: Command = registry_support::jbuild(home);
    cmd.arg("--json").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let m = run_measured(&mut cmd, input, Duration::from_secs(120));
    canary.assert_absent(&format!("{what}: stdout"), &m.output.stdout);
    canary.assert_absent(&format!("{what}: stderr"), &m.output.stderr);
    m
}

fn config(home: &Path, extra: &str) {
    fs::create_dir_all(home.join("certs.d")).unwrap();
    fs::write(
        home.join("jbuild.toml"),
        format!(
            "[registries]\ntimeout_secs = 2\ncerts_dir = \"{}\"\n{extra}",
            home.join("certs.d").display()
        ),
    )
    .unwrap();
}

/// The places jbuild is sent to with the canary, each a way to fail (or
/// not).
struct Targets {
    good: Registry,
    wrong: Registry,
    tls: Registry,
    refusing: Server,
    down: String,
    _dir: tempfile::TempDir,
}

fn targets(canary: &Canary) -> Targets {
    let dir = tempfile::tempdir().unwrap();
    for d in ["good", "wrong", "tls"] {
        fs::create_dir_all(dir.path().join(d)).unwrap();
    }
    let good = Registry::start_with(&Options {
        htpasswd: Some(htpasswd(
            &dir.path().join("good"),
            &[(USER, &canary.secret)],
        )),
        ..Options::default()
    });
    let wrong = Registry::start_with(&Options {
        htpasswd: Some(htpasswd(&dir.path().join("wrong"), &[(USER, "another")])),
        ..Options::default()
    });
    let ca = registry_support::tls::TestCa::new(&dir.path().join("ca"));
    let tls = Registry::start_with(&Options {
        htpasswd: Some(htpasswd(&dir.path().join("tls"), &[(USER, &canary.secret)])),
        tls: Some((ca.server_cert.clone(), ca.server_key.clone())),
        ..Options::default()
    });
    // A token service that refuses, repeating what it was sent (the
    // Authorization header too) in its error, as a careless one might.
    let me = Arc::new(OnceLock::<String>::new());
    let me2 = me.clone();
    let refusing = Server::start(move |req| {
        if req.path.starts_with("/token") {
            let echo = format!(
                "{{\"errors\":[{{\"code\":\"DENIED\",\"message\":\"refused {} with {}\"}}]}}",
                req.path,
                req.header("authorization").unwrap_or("nothing")
            );
            return Answer::json("401 Unauthorized", echo.as_bytes());
        }
        Answer::Reply {
            status: "401 Unauthorized",
            headers: vec![(
                "WWW-Authenticate".into(),
                format!(
                    "Bearer realm=\"http://{}/token\",service=\"s\"",
                    me2.get().unwrap()
                ),
            )],
            body: vec![],
        }
    });
    me.set(refusing.host()).unwrap();
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_host = format!("127.0.0.1:{}", down.local_addr().unwrap().port());
    drop(down);
    Targets {
        good,
        wrong,
        tls,
        refusing,
        down: down_host,
        _dir: dir,
    }
}

/// Push, pull, inspect, history and info with the canary from `source`
/// accepted; then pull and push refused for each reason in `failing`.
fn one_source(source: Source, canary: &Canary, good: &str, failing: &[(&str, String)]) {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    config(h, "");
    let store = jbuild::store::Store::open(&h.join("root/store")).unwrap();
    image::make(&store, "app:1", "secrets", 2048);
    let what = format!("{source:?}");
    let env = home_for(source, good, canary, h);
    // A repository per source: the sources run at once, and Distribution
    // 2.8 loses track of a blob two clients upload to one repository at the
    // same time (MANIFEST_BLOB_UNKNOWN after both uploads said 201; jbuild
    // uploads again then, see tests/it/state/concurrency.rs, but this test is about
    // what it prints, not about that race).
    let name = format!("{good}/canary/{}/app:1", what.to_lowercase());
    for args in [
        vec!["push", "app:1", name.as_str()],
        vec!["pull", name.as_str()],
        vec!["inspect", name.as_str()],
        vec!["history", name.as_str()],
        vec!["info"],
    ] {
        let m = run(h, &env, &args, b"", canary, &format!("{what} {args:?}"));
        assert!(m.output.status.success(), "{what} {args:?}: {}", m.text());
    }
    for (why, host) in failing {
        let env = home_for(source, host, canary, h);
        let name = format!("{host}/canary/app:1");
        for args in [
            vec!["pull", name.as_str()],
            vec!["push", "app:1", name.as_str()],
        ] {
            let m = run(
                h,
                &env,
                &args,
                b"",
                canary,
                &format!("{what}, {why}: {args:?}"),
            );
            assert!(!m.output.status.success(), "{what}, {why}: {}", m.text());
        }
    }
    canary.assert_tree_clean(&what, &h.join("root"));
}

#[test]
fn the_canary_never_leaks_from_any_credential_source() {
    let canary = Arc::new(Canary::new());
    let t = targets(&canary);
    let failing: Vec<(&'static str, String)> = vec![
        ("wrong password", t.wrong.host()),
        ("registry down", t.down.clone()),
        ("TLS failure", t.tls.host()),
        ("token service refusing", t.refusing.host()),
    ];
    // One thread per source: most of the time is spent waiting (retries
    // against the registry that is down).
    let runs: Vec<_> = SOURCES
        .into_iter()
        .map(|source| {
            let (canary, good, failing) = (canary.clone(), t.good.host(), failing.clone());
            std::thread::spawn(move || one_source(source, &canary, &good, &failing))
        })
        .collect();
    let mut failed = Vec::new();
    for (source, r) in SOURCES.iter().zip(runs) {
        if let Err(e) = r.join() {
            failed.push(format!("{source:?}: {:?}", e.downcast_ref::<String>()));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A canary as docker's `identitytoken` for `host`.
fn identity_home(h: &Path, host: &str, canary: &Canary) {
    fs::create_dir_all(h.join("docker")).unwrap();
    fs::write(
        h.join("docker/config.json"),
        serde_json::json!({"auths": {host: {"identitytoken": canary.secret}}}).to_string(),
    )
    .unwrap();
}

#[test]
fn the_canary_never_leaks_from_login_tokens_proxies_or_references() {
    let canary = Canary::new();
    let t = targets(&canary);
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    config(h, "");
    let store = jbuild::store::Store::open(&h.join("root/store")).unwrap();
    image::make(&store, "app:1", "secrets", 2048);
    let bin = write_helper(h);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let trace = vec![
        ("RUST_LOG".to_string(), "trace".to_string()),
        ("PATH".to_string(), path),
    ];
    let stdin_pw = format!("{}\n", canary.secret);
    let login = |host: &str| {
        vec![
            "login".to_string(),
            host.to_string(),
            "-u".into(),
            USER.into(),
        ]
    };
    let with_stdin = |host: &str| {
        let mut v = login(host);
        v.push("--password-stdin".into());
        v
    };
    let with_p = |host: &str| {
        let mut v = login(host);
        v.extend(["-p".to_string(), canary.secret.clone()]);
        v
    };
    let exec = |args: &[String], input: &[u8], env: &[(String, String)], what: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(h, env, &args, input, &canary, what)
    };

    // Logins that work, through stdin and -p; the credentials land in
    // docker's config.json (its job), outside JBUILD_ROOT.
    let m = exec(
        &with_stdin(&t.good.host()),
        stdin_pw.as_bytes(),
        &trace,
        "login --password-stdin",
    );
    assert!(m.output.status.success(), "{}", m.text());
    let m = exec(&with_p(&t.good.host()), b"", &trace, "login -p");
    assert!(m.output.status.success(), "{}", m.text());
    let kept = fs::read_to_string(h.join("docker/config.json")).unwrap();
    assert!(kept.contains(&t.good.host()), "{kept}");
    // ... and a push with what was kept.
    let name = format!("{}/canary/app:1", t.good.host());
    let m = exec(
        &["push".into(), "app:1".into(), name.clone()],
        b"",
        &trace,
        "push after login",
    );
    assert!(m.output.status.success(), "{}", m.text());

    // Logins that fail, for each reason, both ways of giving the password.
    for (why, host) in [
        ("wrong password", t.wrong.host()),
        ("registry down", t.down.clone()),
        ("TLS failure", t.tls.host()),
        ("token service refusing", t.refusing.host()),
    ] {
        let m = exec(&with_stdin(&host), stdin_pw.as_bytes(), &trace, why);
        assert!(!m.output.status.success(), "{why}: {}", m.text());
        let m = exec(&with_p(&host), b"", &trace, why);
        assert!(!m.output.status.success(), "{why}: {}", m.text());
    }

    // A credential helper that fails to store and prints what it was
    // given (the JSON with the secret) on its stderr: jbuild shows that
    // stderr, with the secret replaced.
    fs::write(
        h.join("docker/config.json"),
        serde_json::json!({"credsStore": "canary"}).to_string(),
    )
    .unwrap();
    fs::write(h.join("fail-store"), "").unwrap();
    let m = exec(
        &with_stdin(&t.good.host()),
        stdin_pw.as_bytes(),
        &trace,
        "helper store fails",
    );
    assert!(!m.output.status.success(), "{}", m.text());
    assert!(
        m.stderr().contains("cannot store") && m.stderr().contains("<redacted>"),
        "the helper's stderr is shown, redacted:\n{}",
        m.text()
    );

    // An identity token, refused by the token service and by a registry
    // that has none.
    for host in [t.refusing.host(), t.good.host()] {
        identity_home(h, &host, &canary);
        let name = format!("{host}/canary/app:1");
        let m = exec(&["pull".into(), name], b"", &trace, "identity token");
        assert!(!m.output.status.success(), "{}", m.text());
    }

    // A proxy with userinfo in the environment, that is not there.
    fs::write(h.join("docker/config.json"), "{}").unwrap();
    let encoded: String = url::form_urlencoded::byte_serialize(canary.secret.as_bytes()).collect();
    let proxy = format!("http://proxyuser:{encoded}@{}/", t.down);
    let mut env = trace.clone();
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
    ] {
        env.push((k.to_string(), proxy.clone()));
    }
    let m = exec(
        &["pull".into(), name.clone()],
        b"",
        &env,
        "proxy with userinfo",
    );
    assert!(!m.output.status.success(), "{}", m.text());

    // Credentials inside an image reference are refused, unrepeated.
    let bad = format!("{USER}:{encoded}@{}/canary/app:1", t.good.host());
    for args in [
        vec!["pull".to_string(), bad.clone()],
        vec!["push".into(), "app:1".into(), bad.clone()],
    ] {
        let m = exec(&args, b"", &trace, "user:pass@host reference");
        assert_eq!(m.output.status.code(), Some(1), "{}", m.text());
        assert!(
            m.stderr().contains("cannot hold a user name and password")
                && m.stderr().contains("jbuild login"),
            "{}",
            m.text()
        );
    }

    canary.assert_tree_clean("login etc.", &h.join("root"));
}

/// A registry whose upload `Location` points at another host (a hostile
/// or misconfigured one): the upload goes there, the credentials do not.
#[test]
fn credentials_stay_with_their_registry_when_an_upload_goes_elsewhere() {
    let elsewhere = Server::start(|_| Answer::status("201 Created"));
    let target = elsewhere.host();
    let registry = Server::start(move |req| match (req.method.as_str(), req.path.as_str()) {
        (_, "/v2/") if req.header("Authorization").is_none() => Answer::Reply {
            status: "401 Unauthorized",
            headers: vec![("WWW-Authenticate".into(), "Basic realm=\"r\"".into())],
            body: vec![],
        },
        (_, "/v2/") => Answer::json("200 OK", b"{}"),
        ("HEAD", _) => Answer::status("404 Not Found"),
        ("POST", _) => Answer::Reply {
            status: "202 Accepted",
            headers: vec![(
                "Location".into(),
                format!("http://{target}/upload/u1?state=s"),
            )],
            body: vec![],
        },
        ("PUT", p) if p.contains("/manifests/") => Answer::status("201 Created"),
        _ => Answer::status("404 Not Found"),
    });
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    config(h, "");
    let store = jbuild::store::Store::open(&h.join("root/store")).unwrap();
    image::make(&store, "app:1", "elsewhere", 2048);
    let basic = base64::engine::general_purpose::STANDARD.encode("user:canary-password");
    fs::create_dir_all(h.join("docker")).unwrap();
    fs::write(
        h.join("docker/config.json"),
        format!(
            "{{\"auths\":{{\"{}\":{{\"auth\":\"{basic}\"}}}}}}",
            registry.host()
        ),
    )
    .unwrap();
    let m = run_measured(
        registry_support::jbuild(h).args(["push", "app:1", &format!("{}/app:1", registry.host())]),
        b"",
        Duration::from_secs(60),
    );
    assert!(m.output.status.success(), "{}", m.text());
    let at_registry = registry.requests();
    assert!(
        at_registry
            .iter()
            .any(|r| r.method == "POST" && r.header("Authorization").is_some()),
        "the registry itself got the credentials: {at_registry:#?}"
    );
    let uploads = elsewhere.requests();
    assert!(uploads.iter().any(|r| r.method == "PUT"), "{uploads:#?}");
    for r in &uploads {
        assert!(r.header("Authorization").is_none(), "{r:#?}");
        assert!(r.path.contains("digest=sha256%3A"), "{r:#?}");
    }
}
