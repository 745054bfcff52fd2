//! tty reporter
pub struct TtyReporter;
