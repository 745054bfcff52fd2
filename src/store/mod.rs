//! Local OCI image layout store (owned by the store work).
