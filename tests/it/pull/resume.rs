//! Pulls that resume across runs: a pull killed (SIGKILL) or failed in the
//! middle of a layer leaves what it had in the store's staging area
//! (`.jbuild/tmp/partial-<hex>`), and the next pull of the image asks the
//! registry only for the rest. The bytes are counted at a proxy between
//! jbuild and a real Distribution registry; the store is checked with
//! `jbuild check` after the kill and after the resumed pull.

use crate::support::registry as registry_support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use jbuild::digest::Digest;
use jbuild::store::Store;
use registry_support::image::{streamed, verify_layout};
use registry_support::proxy::{Fault, FaultKind, Proxy};
use registry_support::{run_bounded, run_ok, Registry};

const MIB: u64 = 1 << 20;
/// What a resumed pull may fetch beyond the missing part: the write
/// buffer of one blob (1 MiB), which a kill can lose before it reaches the
/// file.
const MARGIN: u64 = MIB;
const LIMIT: Duration = Duration::from_secs(300);

/// A registry holding `jbuild/big:1`, one random layer of `size` bytes
/// (and a tar header), behind a proxy that counts what it serves.
struct Setup {
    _registry: Registry,
    _seed: tempfile::TempDir,
    proxy: Proxy,
    layer: Digest,
    layer_size: u64,
    manifest: String,
    /// The state root of the pulls.
    home: tempfile::TempDir,
}

impl Setup {
    fn new(size: u64, config: &str) -> Setup {
        let registry = Registry::start();
        let seed = tempfile::tempdir().unwrap();
        let store = Store::open(&seed.path().join("root/store")).unwrap();
        let random = std::fs::File::open("/dev/urandom").unwrap();
        let (desc, layer, layer_size) = streamed(&store, "big:1", size, random);
        run_ok(
            registry_support::jbuild(seed.path()).args([
                "push",
                "big:1",
                &format!("{}/jbuild/big:1", registry.host()),
            ]),
            LIMIT,
        );
        let proxy = Proxy::start(registry.port, Vec::new());
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("jbuild.toml"), config).unwrap();
        Setup {
            _registry: registry,
            _seed: seed,
            proxy,
            layer,
            layer_size,
            manifest: desc.digest().to_string(),
            home,
        }
    }

    fn name(&self) -> String {
        format!("127.0.0.1:{}/jbuild/big:1", self.proxy.port)
    }

    fn jbuild(&self) -> std::process::Command {
        registry_support::jbuild(self.home.path())
    }

    fn store(&self) -> PathBuf {
        self.home.path().join("root/store")
    }

    fn partial(&self) -> PathBuf {
        self.store()
            .join(".jbuild/tmp")
            .join(format!("partial-{}", self.layer.hex()))
    }

    /// The file in the staging area that holds `len` bytes.
    fn staged(&self, len: u64) -> Option<PathBuf> {
        std::fs::read_dir(self.store().join(".jbuild/tmp"))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.len() == len))
    }

    /// Body bytes of the layer the proxy has served since it was last
    /// cleared.
    fn served(&self) -> u64 {
        self.proxy.served(self.layer.hex())
    }

    /// Starts a pull whose layer stalls at byte `at`, waits until the
    /// partial file holds exactly those bytes, and kills the pull with
    /// SIGKILL.
    fn kill_at(&self, at: u64) {
        let hex: &'static str = Box::leak(self.layer.hex().to_string().into_boxed_str());
        self.proxy
            .add_faults(vec![Fault::new("GET", hex, 1, FaultKind::StallAt(at))]);
        let mut child = self
            .jbuild()
            .args(["pull", &self.name()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        loop {
            // Whatever file the layer is staged in (the partial one, when
            // resumption works).
            let len = self.staged(at).map_or(0, |_| at);
            if len == at && self.served() == at {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the pull ended ({status}) before it was killed, with {len} bytes");
            }
            assert!(
                start.elapsed() < LIMIT,
                "the partial file never reached {at} bytes (it has {len}, {} served)",
                self.served()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }

    fn pull(&self) -> Output {
        run_bounded(self.jbuild().args(["pull", &self.name()]), LIMIT)
    }

    /// `jbuild --json check`: exits 0 (no damage); its reclaimable kinds.
    fn check_sound(&self, when: &str) -> Vec<String> {
        let out = run_bounded(self.jbuild().args(["--json", "check"]), LIMIT);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{when}: jbuild check found damage:\n{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["sound"], true, "{when}: {text}");
        v["reclaimable"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_string())
            .collect()
    }

    /// The pull worked and the store holds the whole image, every blob
    /// hashing to its name, no partial file left.
    fn whole(&self, out: &Output) {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), self.manifest);
        verify_layout(&self.store());
        let blob = self.store().join("blobs/sha256").join(self.layer.hex());
        assert_eq!(std::fs::metadata(blob).unwrap().len(), self.layer_size);
        assert!(!self.partial().exists(), "the partial file is still there");
        let kinds = self.check_sound("after the resumed pull");
        assert!(!kinds.contains(&"partial-blob".to_string()), "{kinds:?}");
    }
}

fn flip_byte(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    b[0] ^= 0xff;
    f.write_all_at(&b, at).unwrap();
}

/// The case: a 256 MiB layer, the pull killed at half of it; the
/// pull run again fetches at most the other half (plus [`MARGIN`]), and
/// `jbuild check` is sound after the kill and after the resumed pull.
#[test]
fn a_pull_killed_at_half_a_256_mib_layer_fetches_only_the_rest() {
    let s = Setup::new(256 * MIB, "");
    let half = s.layer_size / 2;
    s.kill_at(half);
    let first = s.served();
    let kinds = s.check_sound("after the kill");
    s.proxy.clear_served();
    let started = Instant::now();
    let out = s.pull();
    let second = s.served();
    s.whole(&out);
    eprintln!(
        "layer {} bytes: killed after {first} bytes served; the resumed pull was served \
         {second} bytes in {:.1?} (the rest: {})",
        s.layer_size,
        started.elapsed(),
        s.layer_size - half
    );
    assert!(
        second <= s.layer_size - half + MARGIN,
        "the resumed pull fetched {second} bytes of {} (had {half})",
        s.layer_size
    );
    assert!(
        kinds.contains(&"partial-blob".to_string()),
        "the kept part was not reported as reclaimable after the kill: {kinds:?}"
    );
}

/// A kept part whose bytes were changed on disk is not trusted: the whole
/// blob is checked, found wrong, fetched again from its first byte, and
/// the pull ends with the right image.
#[test]
fn a_corrupted_kept_part_is_fetched_again_whole() {
    let s = Setup::new(16 * MIB, "");
    let half = s.layer_size / 2;
    s.kill_at(half);
    flip_byte(&s.staged(half).unwrap(), 1000);
    s.proxy.clear_served();
    let out = s.pull();
    let second = s.served();
    s.whole(&out);
    eprintln!(
        "corrupted kept part: served {second} bytes (the rest, {}, then the whole layer, {})",
        s.layer_size - half,
        s.layer_size
    );
    assert_eq!(
        second,
        s.layer_size - half + s.layer_size,
        "the rest, then the whole blob again"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("was not right; fetching it whole"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `keep_partial_mib` bounds what is kept: a pull that fails at 8 MiB of
/// a 16 MiB layer keeps 4 MiB (the bound), `check` reports it as
/// reclaimable, the next pull fetches the other 12 MiB; a pull killed at
/// 8 MiB leaves 8 MiB, which the next pull cuts to 4 MiB before it
/// continues; `prune` and `check --repair` remove what is kept.
#[test]
fn the_partial_cap_holds() {
    let s = Setup::new(16 * MIB, "[registries]\nkeep_partial_mib = 4\n");
    let hex: &'static str = Box::leak(s.layer.hex().to_string().into_boxed_str());
    let cut = 8 * MIB;
    // Failed: the blob always breaks off at 8 MiB.
    s.proxy
        .add_faults(vec![Fault::new("GET", hex, 100, FaultKind::CutAt(cut))]);
    let failed = s.pull();
    assert!(!failed.status.success(), "the pull should have failed");
    assert_eq!(
        std::fs::metadata(s.partial()).map_or(0, |m| m.len()),
        4 * MIB,
        "what the failed pull kept"
    );
    let kinds = s.check_sound("after the failed pull");
    assert!(kinds.contains(&"partial-blob".to_string()), "{kinds:?}");
    s.proxy.clear_faults();
    s.proxy.clear_served();
    let out = s.pull();
    let after_failure = s.served();
    s.whole(&out);
    assert_eq!(
        after_failure,
        s.layer_size - 4 * MIB,
        "fetched after a failure"
    );

    // Killed: the file holds 8 MiB until the next pull cuts it.
    run_ok(s.jbuild().args(["rmi", &s.name()]), LIMIT);
    run_ok(s.jbuild().arg("prune"), LIMIT);
    s.proxy.clear_served();
    s.kill_at(cut);
    assert_eq!(std::fs::metadata(s.partial()).unwrap().len(), cut);
    s.proxy.clear_served();
    let out = s.pull();
    let after_kill = s.served();
    s.whole(&out);
    assert_eq!(after_kill, s.layer_size - 4 * MIB, "fetched after a kill");
    eprintln!(
        "cap 4 MiB, 16 MiB layer: fetched {after_failure} bytes after a failure at 8 MiB, \
         {after_kill} after a kill at 8 MiB"
    );

    // prune removes what is kept.
    run_ok(s.jbuild().args(["rmi", &s.name()]), LIMIT);
    run_ok(s.jbuild().arg("prune"), LIMIT);
    s.proxy.clear_served();
    s.kill_at(cut);
    let pruned = run_ok(s.jbuild().args(["--json", "prune"]), LIMIT);
    let v: serde_json::Value = serde_json::from_str(&pruned).unwrap();
    assert_eq!(v["partial_bytes_freed"], cut, "{pruned}");
    assert!(!s.partial().exists());

    // So does check --repair.
    s.proxy.clear_served();
    s.kill_at(cut);
    run_ok(s.jbuild().args(["check", "--repair"]), LIMIT);
    assert!(
        !s.partial().exists(),
        "check --repair left the partial blob"
    );
    assert!(!s
        .check_sound("after check --repair")
        .contains(&"partial-blob".to_string()));
}
