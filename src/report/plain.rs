//! plain reporter
pub struct PlainReporter;
