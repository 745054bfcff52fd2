//! record reporter
pub struct RecordingReporter;
pub enum Event {}
