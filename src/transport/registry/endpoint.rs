//! Where a registry is reached: the scheme (HTTPS first, as docker tries;
//! plain HTTP only where allowed) and the CA certificates docker's
//! `certs.d` convention gives for it.

use std::path::PathBuf;
use std::time::Duration;

use super::conn::chain;

/// Where docker and podman look for a registry's CA certificates.
pub const DEFAULT_CERTS_DIRS: [&str; 2] = ["/etc/docker/certs.d", "/etc/containers/certs.d"];

/// [`DEFAULT_CERTS_DIRS`], as paths.
pub fn certs_dirs_default() -> Vec<PathBuf> {
    DEFAULT_CERTS_DIRS.iter().map(PathBuf::from).collect()
}

/// For a registry allowed plain HTTP: HTTPS if it answers HTTPS (as docker
/// tries first), else plain HTTP.
pub(super) async fn probe_scheme(
    http: &reqwest::Client,
    host: &str,
    timeout: Duration,
) -> &'static str {
    let probe = |scheme: &str| {
        http.get(format!("{scheme}://{host}/v2/"))
            .timeout(timeout.min(Duration::from_secs(10)))
            .send()
    };
    match probe("https").await {
        Ok(_) => "https",
        // It speaks TLS, with a certificate we do not trust: stay on HTTPS,
        // so the request fails with the certificate advice instead of a
        // confusing 400 from sending plain HTTP to a TLS port.
        Err(e) if chain(&e).to_ascii_lowercase().contains("certificate") => "https",
        Err(e) => {
            tracing::debug!(error = %chain(&e), host, "no HTTPS; using plain HTTP");
            "http"
        }
    }
}

/// The PEM files docker's `certs.d` convention names for `registry`:
/// `DIR/HOST[:PORT]/*.crt`, from every directory in `dirs`.
pub fn load_certs(dirs: &[PathBuf], registry: &str) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for dir in dirs {
        let d = dir.join(registry);
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "crt"))
            .collect();
        paths.sort();
        for p in paths {
            let pem = std::fs::read(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            out.push((p, pem));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certs_follow_docker_certs_d() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("reg.lan:5000");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("ca.crt"), b"PEM").unwrap();
        std::fs::write(d.join("client.key"), b"KEY").unwrap();
        std::fs::create_dir_all(t.path().join("other")).unwrap();
        std::fs::write(t.path().join("other/ca.crt"), b"X").unwrap();
        let got = load_certs(&[t.path().to_path_buf()], "reg.lan:5000").unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, b"PEM");
        assert!(load_certs(&[t.path().to_path_buf()], "none:1")
            .unwrap()
            .is_empty());
    }
}
