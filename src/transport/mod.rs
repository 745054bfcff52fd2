//! Transport seam (owned by the store work).
