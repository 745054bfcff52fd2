//! The state root under stress: crashes (SIGKILL at random points),
//! concurrent processes, a full disk.

mod concurrency;
mod crash;
mod df;
mod full_disk;
