//! A real CNCF Distribution registry (`/usr/bin/docker-registry`, Debian
//! package `docker-registry`) on 127.0.0.1 and a free port, with its data
//! in a temporary directory; stopped when dropped. Small on purpose: the
//! full harness (auth, TLS, a fault proxy) lives in `registry/`.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BINARY: &str = "/usr/bin/docker-registry";

pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// `host:port` as a reference writes it.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn start() -> Registry {
        assert!(
            Path::new(BINARY).exists(),
            "{BINARY} is missing: apt-get install docker-registry"
        );
        let dir = tempfile::tempdir().unwrap();
        // A port the kernel just gave out is free; the registry takes it
        // at once (a race with another process is possible but rare, and
        // then the wait below fails with the registry's log).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
                 delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start docker-registry");
        let mut reg = Registry {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !reg.answers() {
            if let Ok(Some(status)) = reg.child.try_wait() {
                panic!("docker-registry exited ({status}): {}", reg.log());
            }
            assert!(Instant::now() < deadline, "registry not up: {}", reg.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        reg
    }

    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let req = format!(
            "GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        if s.write_all(req.as_bytes()).is_err() {
            return false;
        }
        let mut buf = [0u8; 12];
        s.read_exact(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.1 200")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
