//! gzip on every core, one stream: pigz's way.
//!
//! A layer's gzip was one deflate stream on one thread: for a 200 MB layer
//! that is most of a first build's CPU (8 s of 16 s, `perf`, issue 34), while
//! the machine's limit (`tar | pigz -6`) compresses on all cores. Here the
//! input is cut into blocks of [`BLOCK`] bytes; each block is deflated on
//! its own by a pool of workers, primed with the 32 KiB before it as its
//! dictionary (so matches still reach back across the cut) and ended with a
//! sync flush (byte-aligned, so the pieces simply concatenate); the last
//! block ends the stream. The CRC-32 of each block is combined in order.
//! The output is one ordinary gzip member that any gunzip reads.
//!
//! The bytes depend on the block size and the level only, never on the
//! number of workers or their timing, so a layer's digest is reproducible
//! across machines. They differ from a single deflate stream's (and so from
//! the gzip digests of jbuild before issue 34).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;

use flate2::{Compress, Crc, FlushCompress, Status};

/// Uncompressed bytes per block (pigz's default too). Part of the output's
/// definition: changing it changes every gzip layer digest.
pub const BLOCK: usize = 128 << 10;
/// Deflate's window: the dictionary each block is primed with.
const WINDOW: usize = 32 << 10;

struct Job {
    seq: u64,
    /// The (up to) 32 KiB of input before `data`.
    dict: Vec<u8>,
    data: Vec<u8>,
    last: bool,
}

struct Done {
    seq: u64,
    deflated: io::Result<Vec<u8>>,
    crc: Crc,
    /// The block's input buffer, for reuse.
    data: Vec<u8>,
}

/// Compresses everything written to it as one gzip member at `level` into
/// `out`, with `workers` (≥ 1) threads of the scope it was made in.
/// [`finish`](Self::finish) must be called: it writes the last block and
/// the trailer, and returns `out`.
pub struct ParallelGz<W: Write> {
    out: W,
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    /// Input not yet sent: fills up to [`BLOCK`].
    pending: Vec<u8>,
    /// The last [`WINDOW`] bytes of input sent.
    window: Vec<u8>,
    next_seq: u64,
    next_out: u64,
    waiting: BTreeMap<u64, Done>,
    spare: Vec<Vec<u8>>,
    crc: Crc,
    in_flight: usize,
    limit: usize,
}

impl<W: Write> ParallelGz<W> {
    /// Starts `workers` threads in `scope` and writes the gzip header.
    pub fn new<'scope>(
        scope: &'scope thread::Scope<'scope, '_>,
        level: u32,
        workers: usize,
        mut out: W,
    ) -> io::Result<Self> {
        let workers = workers.max(1);
        // Header as flate2's GzBuilder writes it with no name: mtime 0,
        // XFL 0 for a middle level, OS 255 ("unknown").
        let xfl = match level {
            9.. => 2,
            0 | 1 => 4,
            _ => 0,
        };
        out.write_all(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 255])?;
        let (jobs, job_rx) = mpsc::sync_channel::<Job>(workers * 2);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done) = mpsc::channel::<Done>();
        for _ in 0..workers {
            let rx = Arc::clone(&job_rx);
            let tx = done_tx.clone();
            scope.spawn(move || worker(&rx, &tx, level));
        }
        Ok(ParallelGz {
            out,
            jobs: Some(jobs),
            done,
            pending: Vec::with_capacity(BLOCK),
            window: Vec::with_capacity(WINDOW),
            next_seq: 0,
            next_out: 0,
            waiting: BTreeMap::new(),
            spare: Vec::new(),
            crc: Crc::new(),
            in_flight: 0,
            limit: workers * 3,
        })
    }

    /// Sends the pending block to the workers, first writing out finished
    /// blocks while too many are in flight.
    fn send(&mut self, last: bool) -> io::Result<()> {
        while self.in_flight >= self.limit {
            self.collect_one()?;
        }
        let mut data = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BLOCK));
        data.clear();
        std::mem::swap(&mut data, &mut self.pending);
        let dict = self.window.clone();
        // The next block's dictionary: the last WINDOW bytes so far.
        if data.len() >= WINDOW {
            self.window.clear();
            self.window.extend_from_slice(&data[data.len() - WINDOW..]);
        } else {
            self.window.extend_from_slice(&data);
            let cut = self.window.len().saturating_sub(WINDOW);
            self.window.drain(..cut);
        }
        let job = Job {
            seq: self.next_seq,
            dict,
            data,
            last,
        };
        self.next_seq += 1;
        self.in_flight += 1;
        self.jobs
            .as_ref()
            .expect("jobs open until finish")
            .send(job)
            .map_err(|_| io::Error::other("the gzip workers stopped"))
    }

    /// Waits for one finished block and writes out every block now in order.
    fn collect_one(&mut self) -> io::Result<()> {
        let done = self
            .done
            .recv()
            .map_err(|_| io::Error::other("the gzip workers stopped"))?;
        self.in_flight -= 1;
        self.waiting.insert(done.seq, done);
        while let Some(done) = self.waiting.remove(&self.next_out) {
            self.out.write_all(&done.deflated?)?;
            self.crc.combine(&done.crc);
            self.spare.push(done.data);
            self.next_out += 1;
        }
        Ok(())
    }

    /// Ends the stream (last block, CRC-32 and length) and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.send(true)?;
        // Closing the queue lets the workers end once it is empty.
        self.jobs = None;
        while self.in_flight > 0 {
            self.collect_one()?;
        }
        let crc = self.crc.sum();
        let size = self.crc.amount();
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.write_all(&size.to_le_bytes())?;
        Ok(self.out)
    }
}

impl<W: Write> Write for ParallelGz<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = BLOCK - self.pending.len();
        let n = room.min(data.len());
        self.pending.extend_from_slice(&data[..n]);
        if self.pending.len() == BLOCK {
            self.send(false)?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn worker(jobs: &Mutex<Receiver<Job>>, done: &Sender<Done>, level: u32) {
    loop {
        // The lock is held only while waiting for the next job.
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let mut crc = Crc::new();
        crc.update(&job.data);
        let deflated = deflate_block(level, &job.dict, &job.data, job.last);
        let sent = done.send(Done {
            seq: job.seq,
            deflated,
            crc,
            data: job.data,
        });
        if sent.is_err() {
            return;
        }
    }
}

/// One block as raw deflate, primed with `dict`, ended by a sync flush
/// (or, for the last block, the end of the stream). A new compressor for
/// each block: one reused after `reset` gave other (still valid) bytes
/// depending on the blocks it had compressed before, so the output
/// depended on which worker took which block (zlib-rs 0.5).
fn deflate_block(level: u32, dict: &[u8], data: &[u8], last: bool) -> io::Result<Vec<u8>> {
    let mut deflate = Compress::new(flate2::Compression::new(level), false);
    if !dict.is_empty() {
        deflate.set_dictionary(dict).map_err(io::Error::other)?;
    }
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    // Stored blocks bound the output: 5 bytes per 16 KiB or so, plus the end.
    let mut out = Vec::with_capacity(data.len() + data.len() / 1024 + 64);
    let start_in = deflate.total_in();
    loop {
        let used = (deflate.total_in() - start_in) as usize;
        let status = deflate
            .compress_vec(&data[used..], &mut out, flush)
            .map_err(io::Error::other)?;
        let used = (deflate.total_in() - start_in) as usize;
        let room_left = out.len() < out.capacity();
        match status {
            Status::StreamEnd => break,
            // Not the last block: done once all input is in and the flush
            // did not stop for lack of room.
            Status::Ok | Status::BufError if !last && used == data.len() && room_left => break,
            _ => out.reserve(out.capacity().max(1024)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::MultiGzDecoder;
    use std::io::Read;

    fn gz(data: &[u8], workers: usize, piece: usize) -> Vec<u8> {
        thread::scope(|s| {
            let mut w = ParallelGz::new(s, 6, workers, Vec::new()).unwrap();
            for c in data.chunks(piece.max(1)) {
                w.write_all(c).unwrap();
            }
            w.finish().unwrap()
        })
    }

    fn sample(n: usize) -> Vec<u8> {
        // Half text, half pseudo-random bytes, so matches cross blocks.
        let mut x: u32 = 1;
        (0..n)
            .map(|i| {
                if (i / 5000) % 2 == 0 {
                    b"jails build layered images\n"[i % 27]
                } else {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                }
            })
            .collect()
    }

    #[test]
    fn gunzip_gives_back_the_input_whatever_the_size() {
        for n in [
            0,
            1,
            WINDOW - 1,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            3 * BLOCK + 777,
            1 << 20,
        ] {
            let data = sample(n);
            let blob = gz(&data, 2, 10_000);
            let mut back = Vec::new();
            MultiGzDecoder::new(&blob[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back.len(), data.len(), "size {n}");
            assert!(back == data, "size {n}: the bytes differ");
        }
    }

    #[test]
    fn the_bytes_do_not_depend_on_workers_or_write_sizes() {
        // A real executable (this test's own first 1.5 MB: code, tables,
        // runs of zeros), where a reused compressor showed its history;
        // then the synthetic sample.
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let mut data = exe[..exe.len().min(3 << 19)].to_vec();
        data.extend(sample(5 * BLOCK + 4321));
        let one = gz(&data, 1, 1 << 20);
        // Which worker takes which block is up to the scheduler: a worker's
        // earlier blocks must leave no trace in its later ones.
        for round in 0..5 {
            assert!(one == gz(&data, 2, 4096), "round {round}, 2 workers");
            assert!(one == gz(&data, 5, 333), "round {round}, 5 workers");
        }
        // And it compresses: the text half shrinks a lot.
        assert!(
            one.len() < data.len() * 3 / 4,
            "{} of {}",
            one.len(),
            data.len()
        );
    }
}
