//! Build engine: placeholder until the engine lands.

pub mod native;
