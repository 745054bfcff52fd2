//! The dir snapshotter (owned by the store work).
