//! The Jailfile language: parse (with spans), expand INCLUDEs, substitute
//! variables with Dockerfile's ARG/ENV scoping, and hand the planner a
//! [`resolved::Build`]. See `docs/jailfile.md` for the language itself.

pub mod resolved;

pub use resolved::*;
