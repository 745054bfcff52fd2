//! Layer tars: the writer, the tree-walk differ, the path-safe applier,
//! and diff → export → apply round trips.

mod apply;
mod diff;
mod file_flags;
mod overlap;
mod roundtrip;
mod tar;
