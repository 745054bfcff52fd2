//! Progress that moves: the unpack of a pulled layer counts the blob's
//! bytes up to its size, on a terminal (a pseudo-terminal the test opens),
//! in plain lines and in `--json` events, with the same figures; the layer
//! export of a build counts the bytes it writes; a running step says it is
//! alive (docs/progress.md).

use crate::support::registry as registry_support;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jbuild::report::plain::bytes;
use jbuild::report::{JsonReporter, PlainReporter, Reporter, StepInfo, StepResult};
use registry_support::{run_bounded, run_ok, Registry, World};
use serde_json::Value;

const LIMIT: Duration = Duration::from_secs(300);

/// An image whose first layer is `big` incompressible bytes, pushed to a
/// fresh registry; returns the world it came from, the registry, the
/// name to pull and the size of the big layer's blob (its descriptor's).
fn pushed(big: usize) -> (World, Registry, String, u64) {
    let w = World::new(big);
    let reg = Registry::start();
    let name = format!("{}/progress/app:1", reg.addr());
    run_ok(w.jbuild().args(["push", "app:1", &name]), LIMIT);
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(w.store.blob_path(&w.manifest.parse().unwrap())).unwrap(),
    )
    .unwrap();
    let size = manifest["layers"][0]["size"].as_u64().unwrap();
    assert!(size >= big as u64, "{manifest}");
    (w, reg, name, size)
}

/// The width of the terminal [`on_a_terminal`] opens.
const COLUMNS: u16 = 200;

/// What a terminal shows, as the frames drawn: the output split at line
/// ends and carriage returns, escape sequences taken out, and each line
/// wrapped at the terminal's width as the terminal wraps it — indicatif
/// pads a bar's line to the full width and draws the next bar right after
/// it, with no line end between (two bars on screen at once, as when a
/// layer unpacks while its blob downloads, would otherwise read as one
/// line holding both counts).
fn frames(raw: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters, then a final byte in @..~
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            // cursor moves between frames end one as a line end would
            plain.push('\n');
        } else {
            plain.push(c);
        }
    }
    plain
        .split(['\n', '\r'])
        .flat_map(|l| {
            let chars: Vec<char> = l.chars().collect();
            chars
                .chunks(COLUMNS.into())
                .map(|row| row.iter().collect::<String>().trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

/// `96.00 MiB`-style sizes as indicatif and jbuild show them, in bytes.
fn size_of(number: &str, unit: &str) -> Option<f64> {
    let scale = match unit {
        "B" => 1u64,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    Some(number.parse::<f64>().ok()? * scale as f64)
}

/// The `done/total` a bar frame shows (`48.00 MiB/96.00 MiB`), in bytes,
/// each with the text shown.
fn bar_count(frame: &str) -> Option<((f64, String), (f64, String))> {
    let t: Vec<&str> = frame.split_whitespace().collect();
    (1..t.len().saturating_sub(1)).find_map(|i| {
        let (unit, number) = t[i].split_once('/')?;
        let done = size_of(t[i - 1], unit)?;
        let total = size_of(number, t[i + 1])?;
        Some((
            (done, format!("{} {unit}", t[i - 1])),
            (total, format!("{number} {}", t[i + 1])),
        ))
    })
}

/// Runs `cmd` with a new pseudo-terminal ([`COLUMNS`] wide) as its standard
/// output and error; returns what the terminal received. `cmd` is taken
/// whole: it keeps the terminal's far side open until dropped.
fn on_a_terminal(mut cmd: Command) -> (std::process::ExitStatus, Vec<u8>) {
    let size = nix::pty::Winsize {
        ws_row: 50,
        ws_col: COLUMNS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    let out: OwnedFd = pty.slave.try_clone().unwrap();
    let mut child = cmd
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(pty.slave))
        .spawn()
        .unwrap();
    drop(cmd);
    // The child holds the only ends of the terminal's far side now: when
    // it exits, reading the near side ends (EIO).
    let mut master = File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 64 << 10];
        loop {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
        all
    });
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("jbuild still running on the terminal after {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, reader.join().unwrap())
}

#[test]
fn on_a_terminal_the_unpack_count_grows_to_the_layers_size() {
    let (_w, _reg, name, size) = pushed(96 << 20);
    let other = World::new(0);
    let mut pull = other.jbuild();
    pull.args(["pull", &name]);
    let (status, raw) = on_a_terminal(pull);
    let shown = frames(&raw);
    assert!(status.success(), "{status}: {}", shown.join("\n"));

    // Two layers are unpacked; the big one's frames are those whose total
    // is the largest shown.
    let all: Vec<_> = shown
        .iter()
        .filter(|f| f.contains("unpacking layer"))
        .filter_map(|f| bar_count(f))
        .collect();
    let text = || shown.join("\n");
    let biggest = all.iter().map(|(_, (t, _))| *t).fold(0.0, f64::max);
    let counts: Vec<_> = all.iter().filter(|(_, (t, _))| *t == biggest).collect();
    let (_, (total, total_text)) = counts
        .last()
        .unwrap_or_else(|| panic!("no unpack bar with a count on the terminal:\n{}", text()));
    // The total is the blob's size, as shown to two decimals.
    assert!(
        (total - size as f64).abs() <= 0.01 * (1 << 20) as f64,
        "the bar's total {total_text} is not the layer's {size} bytes:\n{}",
        text()
    );
    let done: Vec<f64> = counts.iter().map(|((d, _), _)| *d).collect();
    assert!(
        done.windows(2).all(|w| w[0] <= w[1]),
        "the count went back: {done:?}"
    );
    let distinct = counts
        .iter()
        .map(|((_, d), _)| d.as_str())
        .collect::<std::collections::BTreeSet<_>>();
    assert!(
        distinct.len() >= 3,
        "the count did not move (frames: {distinct:?}):\n{}",
        text()
    );
    let ((_, last), _) = counts.last().unwrap();
    assert_eq!(
        last,
        total_text,
        "the count stopped short of the layer's size:\n{}",
        text()
    );
    // and the line left when it is done says the same size
    assert!(
        shown
            .iter()
            .any(|l| l.contains("unpacking layer") && l.contains(&format!(": {} in ", bytes(size)))),
        "no done line with {}:\n{}",
        bytes(size),
        text()
    );
}

#[test]
fn plain_lines_and_json_events_carry_the_same_figures() {
    let (_w, _reg, name, size) = pushed(24 << 20);

    let plain_home = World::new(0);
    // standard error is a file: plain lines
    let out = run_bounded(plain_home.jbuild().args(["pull", &name]), LIMIT);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let start = err
        .lines()
        .find(|l| l.starts_with("unpacking layer"))
        .unwrap_or_else(|| panic!("no unpack line:\n{err}"));
    assert!(start.ends_with(&format!("({})", bytes(size))), "{err}");
    let done = err
        .lines()
        .find(|l| l.starts_with("unpacking layer") && l.contains(" in "))
        .unwrap_or_else(|| panic!("no line for the unpack's end:\n{err}"));
    assert!(done.contains(&format!(": {} in ", bytes(size))), "{done}");
    assert!(done.ends_with("/s)"), "no rate: {done}");
    // A few lines per transfer, not one per read.
    assert!(err.lines().count() < 40, "{err}");

    let json_home = World::new(0);
    let out = run_ok(json_home.jbuild().args(["--json", "pull", &name]), LIMIT);
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let unpack = |kind: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["event"] == kind && e["id"].as_str().unwrap_or("").starts_with("unpack-"))
            .collect()
    };
    let starts = unpack("transfer_start");
    assert_eq!(starts.len(), 2, "{out}");
    let big = starts
        .iter()
        .find(|e| e["total"] == size)
        .unwrap_or_else(|| panic!("no unpack of {size} bytes:\n{out}"));
    let id = big["id"].as_str().unwrap();
    let progress: Vec<&Value> = unpack("transfer_progress")
        .into_iter()
        .filter(|e| e["id"] == id)
        .collect();
    assert!(!progress.is_empty(), "{out}");
    let figures: Vec<u64> = progress
        .iter()
        .map(|e| e["done"].as_u64().unwrap())
        .collect();
    assert!(figures.windows(2).all(|w| w[0] <= w[1]), "{figures:?}");
    assert!(figures.iter().all(|d| *d <= size), "{figures:?}");
    for e in &progress {
        assert_eq!(e["total"], size, "{e}");
        assert!(e["rate"].is_u64(), "{e}");
        assert!(e.get("eta_seconds").is_some(), "{e}");
    }
    let done: Vec<&Value> = unpack("transfer_done")
        .into_iter()
        .filter(|e| e["id"] == id)
        .collect();
    assert_eq!(done.len(), 1, "{out}");
    assert_eq!(done[0]["done"], size, "{out}");
    assert_eq!(done[0]["total"], size, "{out}");
    assert!(done[0]["rate"].as_u64().unwrap() > 0, "{out}");
    assert!(done[0]["seconds"].as_f64().unwrap() > 0.0, "{out}");
}

#[test]
fn a_builds_layer_export_counts_the_bytes_it_writes() {
    let home = tempfile::tempdir().unwrap();
    let ctx = home.path().join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::write(
        ctx.join("data.bin"),
        registry_support::image::noise("export", 4 << 20),
    )
    .unwrap();
    std::fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nCOPY data.bin /data.bin\n",
    )
    .unwrap();
    let out = run_ok(
        registry_support::jbuild(home.path())
            .args(["--json", "build", "-t", "big:1"])
            .arg(&ctx),
        LIMIT,
    );
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |kind: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| e["event"] == kind && e["id"].as_str().unwrap_or("").starts_with("export-"))
            .collect()
    };
    let start = of("transfer_start");
    assert_eq!(start.len(), 1, "{out}");
    assert!(start[0]["total"].is_null(), "{out}");
    // The dir backend has only the tree walk (the ZFS one: tests/it/snapshot/zfs_vm_cli.rs).
    assert_eq!(start[0]["differ"], "tree-walk", "{out}");
    let progress = of("transfer_progress");
    assert!(!progress.is_empty(), "no export progress:\n{out}");
    let done = of("transfer_done");
    assert_eq!(done.len(), 1, "{out}");
    // The count is of the blob written: the size the image records.
    let written = done[0]["done"].as_u64().unwrap();
    assert!(written > 4 << 20, "{out}");
    let inspect: Value = serde_json::from_str(&run_ok(
        registry_support::jbuild(home.path()).args(["inspect", "big:1"]),
        LIMIT,
    ))
    .unwrap();
    let layer = inspect["manifest"]["layers"][0]["size"].as_u64();
    assert_eq!(layer, Some(written), "{inspect}");
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn step() -> StepInfo {
    StepInfo {
        index: 2,
        total: 3,
        stage: "0".into(),
        text: "RUN sleep 600".into(),
    }
}

/// A step running for `runs` with `r`, then done; what was written by the
/// end and a while after.
fn long_step(r: &dyn Reporter, out: &Shared, runs: Duration) -> (String, String) {
    r.step_start(&step());
    std::thread::sleep(runs);
    r.step_done(&step(), StepResult::Done, runs);
    let at_end = out.text();
    std::thread::sleep(Duration::from_millis(300));
    (at_end, out.text())
}

#[test]
fn a_long_step_says_it_is_alive_in_plain_lines_until_it_ends() {
    let out = Shared::default();
    let r = PlainReporter::to_writer(Box::new(out.clone()))
        .with_intervals(Duration::from_secs(5), Duration::from_millis(100));
    let (at_end, later) = long_step(&r, &out, Duration::from_millis(750));
    let alive: Vec<&str> = at_end
        .lines()
        .filter(|l| l.starts_with("[2/3] still running ("))
        .collect();
    assert!((3..=8).contains(&alive.len()), "{at_end}");
    assert!(at_end.ends_with("[2/3] done in 0.75s\n"), "{at_end}");
    assert_eq!(at_end, later, "said more after the step ended");
}

#[test]
fn a_long_step_sends_alive_events_until_it_ends() {
    let out = Shared::default();
    let r =
        JsonReporter::to_writer(Box::new(out.clone())).with_alive_every(Duration::from_millis(100));
    let (at_end, later) = long_step(&r, &out, Duration::from_millis(750));
    let events: Vec<Value> = at_end
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let alive = events.iter().filter(|e| e["event"] == "step_alive").count();
    assert!((3..=8).contains(&alive), "{at_end}");
    assert!(events
        .iter()
        .filter(|e| e["event"] == "step_alive")
        .all(|e| e["index"] == 2 && e["seconds"].is_u64()));
    assert_eq!(events.last().unwrap()["event"], "step_done", "{at_end}");
    assert_eq!(at_end, later, "said more after the step ended");
}

#[test]
fn the_intervals_docs_progress_states_are_the_reporters() {
    let doc = std::fs::read_to_string(registry_support::repo().join("docs/progress.md")).unwrap();
    let said = |figure: String| {
        assert!(
            doc.contains(&figure),
            "docs/progress.md does not say {figure:?}"
        )
    };
    use jbuild::report::{plain::PLAIN_PROGRESS_EVERY, ALIVE_EVERY, JSON_PROGRESS_EVERY};
    said(format!(
        "at most one line every {} s while it runs",
        PLAIN_PROGRESS_EVERY.as_secs()
    ));
    said(format!(
        "`transfer_progress` every {} ms per transfer",
        JSON_PROGRESS_EVERY.as_millis()
    ));
    said(format!(
        "`[2/5] still running (2m30s)` every {} s",
        ALIVE_EVERY.as_secs()
    ));
    said(format!(
        "`step_alive` event (`index`, `seconds`) every {} s",
        ALIVE_EVERY.as_secs()
    ));
}
