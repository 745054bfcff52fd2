//! The command line as a user meets it: messages and exit codes, names as
//! docker resolves them, progress.

mod chains;
mod inspect_format;
mod messages;
mod names;
mod progress;
