//! The one async runtime of the process.
//!
//! Transports are async; everything around them blocks. Each blocking
//! caller enters the runtime through [`block_on`] and leaves it with the
//! result. The runtime is built once, at the first call, and lives as long
//! as the process: an HTTP client (reqwest's) keeps its connection pool
//! and background tasks on the runtime it was first used on, so a client
//! used by two runtimes in a row (a push, then the signatures carried
//! after it) can find its dispatch task gone. With one runtime there is no
//! second one to be on.
//!
//! [`Runtime::block_on`] runs the future on the calling thread (the
//! runtime's workers drive the I/O), so several threads may be inside at
//! once, and a future that blocks for a moment (writing into a pipe that a
//! consumer on another thread reads) holds up only its own caller.
//!
//! [`Runtime::block_on`]: tokio::runtime::Runtime::block_on

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use tokio::runtime::Runtime;

/// The async runtime could not be started (the system would not give it
/// threads): never the user's doing.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the async runtime")]
pub struct RuntimeError(#[source] pub std::io::Error);

impl crate::blame::Blame for RuntimeError {
    fn is_user_error(&self) -> bool {
        false
    }
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static BUILT: AtomicUsize = AtomicUsize::new(0);

/// How many runtimes this process has built: 0 before the first
/// [`block_on`], 1 ever after. Tests assert it.
pub fn runtimes_built() -> usize {
    BUILT.load(Ordering::SeqCst)
}

/// The process's runtime, built at the first call.
pub fn runtime() -> Result<&'static Runtime, RuntimeError> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt);
    }
    // Two threads may both get here; the one that loses drops its runtime
    // unused (before it ever ran anything), and only the kept one counts.
    let built = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("jbuild-async")
        .build()
        .map_err(RuntimeError)?;
    let mut ours = Some(built);
    let rt = RUNTIME.get_or_init(|| {
        BUILT.fetch_add(1, Ordering::SeqCst);
        ours.take().expect("taken once")
    });
    if let Some(spare) = ours {
        spare.shutdown_background();
    }
    debug_assert_eq!(runtimes_built(), 1, "a second async runtime was built");
    Ok(rt)
}

/// Blocking work (file writes of a copy) that one [`block_on`] started.
#[derive(Default)]
struct Pending {
    count: Mutex<usize>,
    done: Condvar,
}

/// Counts one piece of [`Pending`] work down when it ends (or is dropped
/// unrun).
struct Finish(Arc<Pending>);

impl Drop for Finish {
    fn drop(&mut self) {
        let mut n = self.0.count.lock().unwrap_or_else(|e| e.into_inner());
        *n -= 1;
        self.0.done.notify_all();
    }
}

tokio::task_local! {
    static PENDING: Arc<Pending>;
}

/// `spawn_blocking`, counted in the [`block_on`] that runs the caller, so
/// that it waits for the work before it returns.
pub(crate) async fn spawn_blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let finish = PENDING.try_with(Arc::clone).ok().map(|p| {
        *p.count.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        Finish(p)
    });
    tokio::task::spawn_blocking(move || {
        let _finish = finish;
        f()
    })
    .await
}

/// Runs `future` to completion on the process's runtime, from a thread
/// that is not one of its workers (a synchronous caller).
///
/// Blocking work the future started and stopped waiting for (a copy given
/// up at its first failed blob, while another blob is still being written
/// into the store) is finished before this returns, as a runtime dropped
/// at the end of the call would have: the caller cleans up after a
/// failure, and nothing may land behind it.
pub fn block_on<T, E: From<RuntimeError>>(
    future: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let pending = Arc::new(Pending::default());
    let out = runtime()?.block_on(PENDING.scope(pending.clone(), future));
    let mut n = pending.count.lock().unwrap_or_else(|e| e.into_inner());
    while *n > 0 {
        n = pending.done.wait(n).unwrap_or_else(|e| e.into_inner());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_caller_shares_one_runtime() {
        let ids: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (0..3)
                            .map(|_| {
                                block_on(async {
                                    Ok::<_, RuntimeError>(tokio::runtime::Handle::current().id())
                                })
                                .unwrap()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(ids.len(), 12);
        assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
        assert_eq!(runtimes_built(), 1);
    }

    #[test]
    fn blocking_work_a_future_gave_up_on_ends_before_block_on_returns() {
        use std::sync::atomic::AtomicBool;
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        block_on(async move {
            let work = spawn_blocking(move || {
                std::thread::sleep(std::time::Duration::from_millis(300));
                d.store(true, Ordering::SeqCst);
            });
            // Started, then abandoned (as a copy abandons its other blobs).
            let _ = tokio::time::timeout(std::time::Duration::from_millis(10), work).await;
            Ok::<_, RuntimeError>(())
        })
        .unwrap();
        assert!(
            done.load(Ordering::SeqCst),
            "block_on returned before the work ended"
        );
    }
}
