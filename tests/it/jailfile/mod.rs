//! The Jailfile language: instructions, variables and scopes, errors with
//! their location, and a fuzzer that must never make the parser panic.

mod dockerfiles;
mod errors;
mod fuzz;
mod instructions;
mod language;
