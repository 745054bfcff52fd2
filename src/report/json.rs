//! json reporter
pub struct JsonReporter;
