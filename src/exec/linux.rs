//! Linux executor (owned by the executor work).
use super::*;
pub struct LinuxExecutor;
impl LinuxExecutor {
    pub fn new() -> Self {
        LinuxExecutor
    }
}
impl Default for LinuxExecutor {
    fn default() -> Self {
        Self::new()
    }
}
impl Executor for LinuxExecutor {
    fn name(&self) -> &'static str {
        "linux-namespaces"
    }
    fn run(&self, _: &Path, _: &RunSpec, _: &mut dyn OutputSink) -> Result<Outcome, ExecError> {
        Err(ExecError::Unsupported("the Linux executor is not written yet".into()))
    }
}
