//! Snapshotter conformance suite (owned by the store work).
