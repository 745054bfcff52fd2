//! The downloads overlapped with the extraction (issue 31): worker
//! threads fetch the closure's packages in install order (`jobs` at a
//! time), and as each arrives, verified, they read its manifests and
//! check what needs no other package (its shell scripts parse, the
//! ABI); the install ([`extract::install_fed`]) takes the packages in
//! install order as they are ready, checks conflicts against the packages
//! before it, and extracts while later ones are still downloading. Its
//! decoder thread (`extract::ahead`) starts on a package's file as soon
//! as it is there.
//!
//! What is said stays the same every run, whatever the timing: a
//! package's [`Event::Fetched`] is said when the install takes it, in
//! install order; only [`Event::Progress`] follows the downloads as they
//! go. The first error in install order wins: every package before a
//! failed one was started (the workers take them in order) and is
//! installed before the install comes to the failure; a failure of the
//! install itself stops the workers from starting more.
//!
//! The package cache's rules hold as in [`fetch::fetch_all`]: each
//! download is verified in its temporary file, and once the downloads
//! have ended (on the last worker, while the install goes on) the
//! verified files are synced together and renamed to their checksums'
//! names ([`fetch::keep`]), whatever failed beside them. The workers open
//! each file as soon as it verifies, so the rename does not move it from
//! under its readers.

use std::fs::File;
use std::io::{self, Seek};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use super::*;
use crate::pkg::extract::ahead::Files;
use crate::pkg::fetch::{Fetched, Pending, PROGRESS_EVERY};

/// The closure's packages as the workers leave them, shared by the
/// workers, the install and its decoder.
pub(super) struct Pipeline<'c> {
    closure: &'c [resolve::Chosen<'c>],
    cache: &'c Cache,
    /// The cache's directory, opened before the downloads ([`fetch::keep`]).
    cache_dir: &'c std::fs::File,
    http: &'c Http,
    limits: &'c Limits,
    abi: Option<&'c str>,
    state: Mutex<State>,
    changed: Condvar,
    /// The next package a worker takes.
    next: AtomicUsize,
    /// A worker or the install failed: no more packages are started.
    stop: AtomicBool,
    /// Bytes downloaded so far, all packages together.
    arrived: AtomicU64,
}

#[derive(Default)]
struct State {
    slots: Vec<Slot>,
    /// Verified downloads waiting for [`fetch::keep`].
    pending: Vec<Pending>,
    /// Workers still running.
    workers: usize,
    /// What [`fetch::keep`] said, once the last worker has run it.
    kept: Option<Result<(), FetchError>>,
    /// The install is over: the decoder waits for nothing more.
    closed: bool,
    /// The packages the install has taken so far: a worker starts no
    /// package more than [`AHEAD`] past it.
    taken: usize,
}

/// How many packages the downloads may run ahead of the install: each
/// one waiting holds its file open and its manifests in memory, so a
/// closure of thousands (a pkgbase base) stays within a process's open
/// files.
pub(super) const AHEAD: usize = 128;

/// One package of the closure.
#[derive(Default)]
struct Slot {
    /// A worker finished with it (ready, or failed).
    done: bool,
    /// For the install: what was fetched and opened (taken once).
    ready: Option<(Fetched, Opened)>,
    /// For the decoder: the package file, opened by the worker (taken
    /// once).
    file: Option<File>,
    /// Why it will not come (taken by the install).
    error: Option<InstallError>,
}

impl<'c> Pipeline<'c> {
    pub(super) fn new(
        closure: &'c [resolve::Chosen<'c>],
        req: &'c Request<'c>,
        cache_dir: &'c std::fs::File,
        abi: Option<&'c str>,
    ) -> Pipeline<'c> {
        Pipeline {
            closure,
            cache: req.cache,
            cache_dir,
            http: req.http,
            limits: &req.limits,
            abi,
            state: Mutex::new(State {
                slots: (0..closure.len()).map(|_| Slot::default()).collect(),
                ..State::default()
            }),
            changed: Condvar::new(),
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            arrived: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many workers [`Pipeline::work`] should run: `jobs`, at least
    /// one, at most one a package.
    pub(super) fn workers(&self, jobs: usize) -> usize {
        let n = jobs.clamp(1, self.closure.len().max(1));
        self.lock().workers = n;
        n
    }

    /// Bytes downloaded so far.
    pub(super) fn arrived(&self) -> u64 {
        self.arrived.load(Ordering::Relaxed)
    }

    /// Whether every worker has ended (every download is over).
    pub(super) fn downloads_over(&self) -> bool {
        self.lock().workers == 0
    }

    /// A worker: takes the next package in install order until none is
    /// left or something failed; the last worker out keeps the verified
    /// downloads in the cache.
    pub(super) fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.closure.len() || !self.wait_turn(i) {
                break;
            }
            let r = self.one(&self.closure[i]);
            let mut st = self.lock();
            let slot = &mut st.slots[i];
            slot.done = true;
            match r {
                Ok((fetched, opened, file, pending)) => {
                    slot.ready = Some((fetched, opened));
                    slot.file = Some(file);
                    st.pending.extend(pending);
                }
                Err(e) => {
                    slot.error = Some(e);
                    self.stop.store(true, Ordering::Relaxed);
                }
            }
            drop(st);
            self.changed.notify_all();
        }
        let pending = {
            let mut st = self.lock();
            st.workers -= 1;
            if st.workers > 0 {
                return;
            }
            std::mem::take(&mut st.pending)
        };
        let kept = fetch::keep(self.cache, self.cache_dir, pending);
        self.lock().kept = Some(kept);
        self.changed.notify_all();
    }

    /// Waits until package `i` is at most [`AHEAD`] past what the install
    /// took; false when nothing more is to be started (a failure, or the
    /// install is over).
    fn wait_turn(&self, i: usize) -> bool {
        let mut st = self.lock();
        loop {
            if self.stop.load(Ordering::Relaxed) || st.closed {
                return false;
            }
            if i < st.taken + AHEAD {
                return true;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// One package: fetched (or found in the cache), its file opened, its
    /// manifests read and checked.
    fn one(
        &self,
        c: &resolve::Chosen<'_>,
    ) -> Result<(Fetched, Opened, File, Option<Pending>), InstallError> {
        let (fetched, pending) = fetch::fetch_counted(c, self.cache, self.http, &self.arrived)?;
        let at = pending
            .as_ref()
            .map_or(fetched.path.as_path(), |p| p.path());
        let mut file = File::open(at).map_err(|source| ExtractError::Open {
            path: at.to_path_buf(),
            source,
        })?;
        let reading = file.try_clone().map_err(|source| ExtractError::Open {
            path: at.to_path_buf(),
            source,
        })?;
        // Named by where it is kept, which it is by the time anything
        // could name it.
        let (opened, _) = extract::open_file(&PackageFile::from(&fetched), reading, self.limits)?;
        shell::check_parse(&opened.manifest.scripts, &shell::AT_INSTALL).map_err(|source| {
            InstallError::Script {
                package: opened.label(),
                source: Box::new(source),
            }
        })?;
        if let Some(abi) = self.abi {
            let opts = extract::Options {
                abi: Some(abi.to_string()),
                ..extract::Options::default()
            };
            extract::check_abi(&opened, &opts)?;
        }
        // The clone shared the offset: the decoder reads from the start.
        file.rewind().map_err(|source| ExtractError::Open {
            path: at.to_path_buf(),
            source,
        })?;
        Ok((fetched, opened, file, pending))
    }

    /// The package at `i` for the install, waiting until a worker is done
    /// with it; `tick` runs at least every [`PROGRESS_EVERY`] while it
    /// waits. `Ok(None)` past the last package.
    pub(super) fn take(
        &self,
        i: usize,
        tick: &mut dyn FnMut(),
    ) -> Result<Option<(Fetched, Opened)>, InstallError> {
        if i >= self.closure.len() {
            return Ok(None);
        }
        loop {
            {
                let mut st = self.lock();
                if st.taken < i {
                    st.taken = i;
                    self.changed.notify_all();
                }
                if !st.slots[i].done {
                    st = self
                        .changed
                        .wait_timeout(st, PROGRESS_EVERY)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                let slot = &mut st.slots[i];
                if slot.done {
                    if let Some(e) = slot.error.take() {
                        return Err(e);
                    }
                    return Ok(slot.ready.take());
                }
            }
            tick();
        }
    }

    /// The install failed: no worker starts another package.
    pub(super) fn stop(&self) {
        // Under the lock, so that a worker between its check and its wait
        // cannot miss it.
        let st = self.lock();
        self.stop.store(true, Ordering::Relaxed);
        drop(st);
        self.changed.notify_all();
    }

    /// What keeping the downloads in the cache said (once every worker
    /// has ended: after the scope that ran them).
    pub(super) fn kept(&self) -> Result<(), FetchError> {
        self.lock().kept.take().unwrap_or(Ok(()))
    }
}

impl Files for Pipeline<'_> {
    fn file(&self, i: usize) -> Option<io::Result<File>> {
        let mut st = self.lock();
        loop {
            if st.closed || i >= st.slots.len() {
                return None;
            }
            if st.slots[i].done {
                return st.slots[i].file.take().map(Ok);
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

/// Says how far the downloads are ([`Event::Progress`] of
/// [`Phase::Fetch`]): at most every [`PROGRESS_EVERY`], and once at their
/// end.
pub(super) struct FetchBar {
    /// The bytes to download (of packages the cache does not have).
    pub(super) total: u64,
    last: Option<Instant>,
    said: Option<u64>,
    over: bool,
}

impl FetchBar {
    pub(super) fn new(total: u64) -> FetchBar {
        FetchBar {
            total,
            last: None,
            said: None,
            over: false,
        }
    }

    /// What to say now of `p`'s downloads, if anything.
    pub(super) fn tick(&mut self, p: &Pipeline<'_>) -> Option<Event> {
        if self.over || self.total == 0 {
            return None;
        }
        if p.downloads_over() {
            self.over = true;
            return Some(self.event(self.total));
        }
        if self.last.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            return None;
        }
        self.last = Some(Instant::now());
        let done = p.arrived();
        if done >= self.total || self.said == Some(done) {
            return None;
        }
        self.said = Some(done);
        Some(self.event(done))
    }

    /// Whether the end was said.
    pub(super) fn over(&self) -> bool {
        self.over || self.total == 0
    }

    pub(super) fn event(&self, done: u64) -> Event {
        Event::Progress {
            phase: Phase::Fetch,
            done,
            total: self.total,
        }
    }
}
