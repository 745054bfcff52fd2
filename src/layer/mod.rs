//! Layer tar writer, compression and applier (owned by the layer work).
