//! What the documentation promises: the command and configuration
//! references, man pages, completions, and docs/ci.md's scripts run as
//! written.

mod ci;
mod reference;
