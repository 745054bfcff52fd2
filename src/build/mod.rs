//! Build engine: placeholder until the engine lands.
