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
use std::sync::OnceLock;

use tokio::runtime::Runtime;

/// The async runtime could not be started (the system would not give it
/// threads): never the user's doing.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the async runtime")]
pub struct RuntimeError(#[source] pub std::io::Error);

impl RuntimeError {
    pub fn is_user_error(&self) -> bool {
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

/// Runs `future` to completion on the process's runtime, from a thread
/// that is not one of its workers (a synchronous caller).
pub fn block_on<T, E: From<RuntimeError>>(
    future: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    runtime()?.block_on(future)
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
}
