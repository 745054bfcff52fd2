use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use super::*;

fn basic(u: &str, p: &str) -> Credential {
    Credential::Basic {
        username: u.into(),
        password: Secret::new(p),
    }
}

/// A home directory in a temp dir, and the variables that describe it.
struct Env {
    dir: tempfile::TempDir,
    vars: HashMap<String, OsString>,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let mut vars = HashMap::new();
        vars.insert("HOME".into(), dir.path().join("home").into());
        vars.insert("PATH".into(), std::env::var_os("PATH").unwrap());
        Env { dir, vars }
    }
    fn set(&mut self, k: &str, v: impl Into<OsString>) -> &mut Self {
        self.vars.insert(k.into(), v.into());
        self
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        p
    }
    fn keychain(&self) -> DefaultKeychain {
        DefaultKeychain::from_vars(|k| self.vars.get(k).cloned()).unwrap()
    }
    /// A working credential helper (`docker-credential-<name>`) keeping
    /// secrets as files in a directory, first in `$PATH`.
    fn helper(&mut self, name: &str, script_body: &str) {
        let bin = self.path("bin");
        fs::create_dir_all(&bin).unwrap();
        let p = bin.join(format!("docker-credential-{name}"));
        fs::write(
            &p,
            format!(
                "#!/bin/sh\nSTORE='{}'\n{script_body}",
                self.path(&format!("helper-{name}")).display()
            ),
        )
        .unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        let mut path = OsString::from(bin);
        path.push(":");
        path.push(std::env::var_os("PATH").unwrap());
        self.set("PATH", path);
    }
}

const FILE_HELPER: &str = r#"mkdir -p "$STORE"
key() { printf %s "$1" | tr -c 'A-Za-z0-9' _; }
case "$1" in
get) url=$(cat); f="$STORE/$(key "$url")"
     if [ -f "$f" ]; then cat "$f"; else echo "credentials not found in native keychain"; exit 1; fi ;;
store) json=$(cat); url=$(printf %s "$json" | sed 's/.*"ServerURL":"\([^"]*\)".*/\1/')
     printf %s "$json" > "$STORE/$(key "$url")" ;;
erase) url=$(cat); f="$STORE/$(key "$url")"
     if [ -f "$f" ]; then rm "$f"; else echo "credentials not found in native keychain"; exit 1; fi ;;
*) exit 2 ;;
esac
"#;

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn secrets_never_print() {
    let c = basic("alice", "hunter2");
    assert!(!format!("{c:?}").contains("hunter2"));
    let t = Credential::IdentityToken(Secret::new("tok-123"));
    assert!(!format!("{t:?}").contains("tok-123"));
    assert_eq!(Secret::new("x").to_string(), "<redacted>");
    assert_eq!(Secret::new("x").expose(), "x");
}

#[test]
fn environment_credentials_serve_only_their_registry() {
    let mut e = Env::new();
    e.set("JBUILD_REGISTRY_HOST", "Reg.example:5000")
        .set("JBUILD_REGISTRY_USERNAME", "ci")
        .set("JBUILD_REGISTRY_PASSWORD", "s3cret");
    let k = e.keychain();
    assert_eq!(
        k.get("reg.example:5000").unwrap(),
        Some(basic("ci", "s3cret"))
    );
    assert_eq!(k.get("other.example").unwrap(), None);
}

#[test]
fn multi_keychain_asks_in_order_and_a_broken_source_stops_it() {
    #[derive(Debug)]
    struct Broken;
    impl Keychain for Broken {
        fn resolve(&self, _: &str) -> Result<Option<Credential>, KeychainError> {
            Err(KeychainError::Env {
                message: "broken".into(),
            })
        }
    }
    let mut e = Env::new();
    e.set("JBUILD_REGISTRY_HOST", "reg.example")
        .set("JBUILD_REGISTRY_USERNAME", "ci")
        .set("JBUILD_REGISTRY_PASSWORD", "s3cret");
    let env = EnvKeychain::from_vars(|k| e.vars.get(k).cloned()).unwrap();
    let k = MultiKeychain::new(vec![Arc::new(env), Arc::new(Broken), Arc::new(Anonymous)]);
    assert_eq!(k.get("Reg.Example").unwrap(), Some(basic("ci", "s3cret")));
    assert!(k.get("other.example").is_err());
    let anonymous = MultiKeychain::new(vec![Arc::new(Anonymous)]);
    assert_eq!(anonymous.get("other.example").unwrap(), None);
}

#[test]
fn incomplete_environment_names_what_is_missing() {
    let mut e = Env::new();
    e.set("JBUILD_REGISTRY_USERNAME", "ci");
    let err = DefaultKeychain::from_vars(|k| e.vars.get(k).cloned())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("JBUILD_REGISTRY_HOST and JBUILD_REGISTRY_PASSWORD not set"),
        "{err}"
    );
}

#[test]
fn docker_config_auths_base64_and_identity_token() {
    let mut e = Env::new();
    let cfg = format!(
        r#"{{"auths": {{"reg.example:5000": {{"auth": "{}"}},
                       "https://index.docker.io/v1/": {{"identitytoken": "idtok"}},
                       "empty.example": {{}}}},
            "proxies": {{"default": {{}}}}}}"#,
        b64("bob:pa:ss")
    );
    e.write("docker/config.json", &cfg);
    e.set("DOCKER_CONFIG", e.path("docker"));
    let k = e.keychain();
    assert_eq!(
        k.get("reg.example:5000").unwrap(),
        Some(basic("bob", "pa:ss"))
    );
    for hub in ["docker.io", "index.docker.io", "registry-1.docker.io"] {
        assert_eq!(
            k.get(hub).unwrap(),
            Some(Credential::IdentityToken(Secret::new("idtok"))),
            "{hub}"
        );
    }
    assert_eq!(k.get("empty.example").unwrap(), None);
    assert_eq!(
        k.get("reg.example").unwrap(),
        None,
        "the port is part of the name"
    );
}

#[test]
fn default_docker_config_is_under_home() {
    let e = Env::new();
    e.write(
        "home/.docker/config.json",
        &format!(
            r#"{{"auths": {{"h.example": {{"auth": "{}"}}}}}}"#,
            b64("u:p")
        ),
    );
    assert_eq!(
        e.keychain().get("h.example").unwrap(),
        Some(basic("u", "p"))
    );
}

#[test]
fn containers_auth_json_comes_before_docker_config() {
    let mut e = Env::new();
    let entry = |u: &str| {
        format!(
            r#"{{"auths": {{"h.example": {{"auth": "{}"}}}}}}"#,
            b64(&format!("{u}:p"))
        )
    };
    e.write("docker/config.json", &entry("docker"));
    e.write("run/containers/auth.json", &entry("runtime"));
    e.write("xdg/containers/auth.json", &entry("xdg"));
    e.set("DOCKER_CONFIG", e.path("docker"));
    e.set("XDG_CONFIG_HOME", e.path("xdg"));
    assert_eq!(
        e.keychain().get("h.example").unwrap(),
        Some(basic("xdg", "p"))
    );
    e.set("XDG_RUNTIME_DIR", e.path("run"));
    assert_eq!(
        e.keychain().get("h.example").unwrap(),
        Some(basic("runtime", "p"))
    );
    // $REGISTRY_AUTH_FILE replaces the containers search path.
    let explicit = e.write("explicit.json", r#"{"auths": {}}"#);
    e.set("REGISTRY_AUTH_FILE", &explicit);
    assert_eq!(
        e.keychain().get("h.example").unwrap(),
        Some(basic("docker", "p"))
    );
}

#[test]
fn repository_scoped_keys_are_not_used_for_the_whole_registry() {
    let mut e = Env::new();
    let f = e.write(
        "auth.json",
        &format!(
            r#"{{"auths": {{"quay.io/org/repo": {{"auth": "{}"}}}}}}"#,
            b64("u:p")
        ),
    );
    e.set("REGISTRY_AUTH_FILE", &f);
    assert_eq!(e.keychain().get("quay.io").unwrap(), None);
}

#[test]
fn broken_files_are_named_and_secrets_kept_out() {
    let mut e = Env::new();
    e.set("DOCKER_CONFIG", e.path("docker"));
    let p = e.write("docker/config.json", "{\"auths\": {\n");
    let err = e.keychain().get("h.example").unwrap_err().to_string();
    assert!(
        err.contains(&p.display().to_string()) && err.contains("not valid JSON"),
        "{err}"
    );

    e.write(
        "docker/config.json",
        r#"{"auths": {"h.example": {"auth": "hunter2-not-base64!"}}}"#,
    );
    let err = e.keychain().get("h.example").unwrap_err().to_string();
    assert!(
        err.contains("auths[\"h.example\"]") && err.contains("not base64"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");

    e.write(
        "docker/config.json",
        &format!(
            r#"{{"auths": {{"h.example": {{"auth": "{}"}}}}}}"#,
            b64("nocolon")
        ),
    );
    let err = e.keychain().get("h.example").unwrap_err().to_string();
    assert!(
        err.contains("user:password") && !err.contains("nocolon"),
        "{err}"
    );

    e.write("docker/config.json", r#"{"auths": []}"#);
    let err = e.keychain().get("h.example").unwrap_err().to_string();
    assert!(err.contains("`auths` must be an object"), "{err}");
}

#[test]
fn store_writes_docker_config_privately_and_keeps_other_fields() {
    let mut e = Env::new();
    e.set("DOCKER_CONFIG", e.path("docker"));
    e.write(
        "docker/config.json",
        r#"{"auths": {"other.example": {"auth": "eDp5"}}, "detachKeys": "ctrl-e"}"#,
    );
    let k = e.keychain();
    k.store("reg.example:5000", &basic("alice", "pw")).unwrap();
    k.store("docker.io", &basic("hubuser", "hubpw")).unwrap();
    let p = e.path("docker/config.json");
    assert_eq!(
        fs::metadata(&p).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let v: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
    assert_eq!(v["detachKeys"], "ctrl-e");
    assert_eq!(v["auths"]["other.example"]["auth"], "eDp5");
    assert_eq!(v["auths"]["reg.example:5000"]["auth"], b64("alice:pw"));
    assert_eq!(
        v["auths"]["https://index.docker.io/v1/"]["auth"],
        b64("hubuser:hubpw")
    );
    assert_eq!(
        k.get("reg.example:5000").unwrap(),
        Some(basic("alice", "pw"))
    );

    // A second store replaces, an erase removes, a second erase finds nothing.
    k.store("reg.example:5000", &basic("alice", "new")).unwrap();
    assert_eq!(
        k.get("reg.example:5000").unwrap(),
        Some(basic("alice", "new"))
    );
    assert!(k.erase("reg.example:5000").unwrap());
    assert_eq!(k.get("reg.example:5000").unwrap(), None);
    assert!(!k.erase("reg.example:5000").unwrap());
    assert_eq!(k.get("other.example").unwrap(), Some(basic("x", "y")));
}

#[test]
fn store_creates_a_missing_config_directory() {
    let e = Env::new();
    let k = e.keychain();
    k.store("h.example", &Credential::IdentityToken(Secret::new("t0k")))
        .unwrap();
    let p = e.path("home/.docker/config.json");
    assert_eq!(
        fs::metadata(p.parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    assert_eq!(
        k.get("h.example").unwrap(),
        Some(Credential::IdentityToken(Secret::new("t0k")))
    );
}

#[test]
fn store_writes_into_the_named_auth_file() {
    // As `podman login --authfile F` (or with $REGISTRY_AUTH_FILE): the
    // file is made if missing, and docker's config.json is left alone.
    let mut e = Env::new();
    e.set("REGISTRY_AUTH_FILE", e.path("ci/auth.json"));
    e.set("DOCKER_CONFIG", e.path("docker"));
    let k = e.keychain();
    k.store("Reg.LAN:5000", &basic("ci", "pw")).unwrap();
    let text = fs::read_to_string(e.path("ci/auth.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["auths"]["reg.lan:5000"]["auth"], b64("ci:pw"));
    assert!(!e.path("docker/config.json").exists());
    assert_eq!(k.get("reg.lan:5000").unwrap(), Some(basic("ci", "pw")));
}

#[test]
fn store_updates_the_auth_file_that_answers() {
    let mut e = Env::new();
    let f = e.write(
        "auth.json",
        &format!(
            r#"{{"auths": {{"h.example": {{"auth": "{}"}}}}}}"#,
            b64("old:old")
        ),
    );
    e.set("REGISTRY_AUTH_FILE", &f);
    e.set("DOCKER_CONFIG", e.path("docker"));
    let k = e.keychain();
    k.store("h.example", &basic("new", "new")).unwrap();
    assert_eq!(k.get("h.example").unwrap(), Some(basic("new", "new")));
    assert!(!e.path("docker/config.json").exists());
    assert!(k.erase("h.example").unwrap());
    assert_eq!(k.get("h.example").unwrap(), None);
}

#[test]
fn creds_store_helper_round_trip() {
    let mut e = Env::new();
    e.helper("files", FILE_HELPER);
    e.set("DOCKER_CONFIG", e.path("docker"));
    e.write("docker/config.json", r#"{"credsStore": "files"}"#);
    let k = e.keychain();
    assert_eq!(k.get("h.example").unwrap(), None);
    k.store("h.example", &basic("alice", "pw")).unwrap();
    k.store(
        "docker.io",
        &Credential::IdentityToken(Secret::new("hubtok")),
    )
    .unwrap();
    // The secret went to the helper, not the file.
    let text = fs::read_to_string(e.path("docker/config.json")).unwrap();
    assert!(
        !text.contains(&b64("alice:pw")) && !text.contains("hubtok"),
        "{text}"
    );
    assert!(e.path("helper-files/https___index_docker_io_v1_").exists());
    assert_eq!(k.get("h.example").unwrap(), Some(basic("alice", "pw")));
    assert_eq!(
        k.get("docker.io").unwrap(),
        Some(Credential::IdentityToken(Secret::new("hubtok")))
    );
    assert!(k.erase("h.example").unwrap());
    assert_eq!(k.get("h.example").unwrap(), None);
}

#[test]
fn cred_helpers_win_for_their_registry() {
    let mut e = Env::new();
    e.helper("files", FILE_HELPER);
    e.helper("other", "echo 'should not be called' >&2; exit 1\n");
    e.set("DOCKER_CONFIG", e.path("docker"));
    e.write(
        "docker/config.json",
        r#"{"credsStore": "other", "credHelpers": {"h.example": "files"}}"#,
    );
    let k = e.keychain();
    k.store("h.example", &basic("u", "p")).unwrap();
    assert_eq!(k.get("h.example").unwrap(), Some(basic("u", "p")));
    let err = k.get("x.example").unwrap_err().to_string();
    assert!(
        err.contains("docker-credential-other") && err.contains("should not be called"),
        "{err}"
    );
}

#[test]
fn broken_or_missing_helpers_are_named_without_secrets() {
    let mut e = Env::new();
    e.helper(
        "broken",
        "read line; echo \"keyring locked while storing $line\" >&2; exit 3\n",
    );
    e.set("DOCKER_CONFIG", e.path("docker"));
    e.write("docker/config.json", r#"{"credsStore": "broken"}"#);
    let k = e.keychain();
    let err = k
        .store("h.example", &basic("u", "topsecret"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("docker-credential-broken") && err.contains("keyring locked"),
        "{err}"
    );
    assert!(
        !err.contains("topsecret") && err.contains("<redacted>"),
        "{err}"
    );

    e.write(
        "docker/config.json",
        r#"{"credsStore": "nonexistent-helper"}"#,
    );
    let err = e.keychain().get("h.example").unwrap_err().to_string();
    assert!(
        err.contains("docker-credential-nonexistent-helper") && err.contains("not installed"),
        "{err}"
    );

    // A helper answering garbage: the garbage (which may be a secret) is not repeated.
    e.helper("garbage", "echo 'sekrit-output'\n");
    e.write("docker/config.json", r#"{"credsStore": "garbage"}"#);
    let err = e.keychain().get("h.example").unwrap_err().to_string();
    assert!(
        err.contains("not its JSON protocol") && !err.contains("sekrit"),
        "{err}"
    );
}

#[test]
fn canonical_names() {
    assert_eq!(
        canonical_registry("https://index.docker.io/v1/"),
        "docker.io"
    );
    assert_eq!(
        canonical_registry("Registry.Example:5000"),
        "registry.example:5000"
    );
    assert_eq!(canonical_registry("http://h:1/v2/"), "h:1");
}
