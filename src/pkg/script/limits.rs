//! The bounds a script runs within: a package's script is input, and a
//! hostile or broken one must stop with a clear error instead of running
//! forever or filling memory.

/// What a script may use; [`Default`] is generous for every template of
/// the ports tree (the largest does a few dozen commands).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Commands run (builtins, functions, native and host commands).
    pub commands: u64,
    /// Bytes of a stream (stdout, stderr, a command's input) and bytes
    /// the script writes to files through redirections, each.
    pub output_bytes: usize,
    /// Bytes of one variable's value or one expanded word, and of all
    /// variables together (ten times that).
    pub variable_bytes: usize,
    /// Iterations of `while`, `until` and `for` loops, all together.
    pub loop_iterations: u64,
    /// Nesting of function calls, `eval`, `.`, subshells and command
    /// substitutions, and of compound commands inside each other.
    pub call_depth: usize,
    /// Paths one pathname expansion (or one recursive file command) may
    /// yield.
    pub glob_matches: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            commands: 1_000_000,
            output_bytes: 16 << 20,
            variable_bytes: 1 << 20,
            loop_iterations: 100_000,
            call_depth: 64,
            glob_matches: 10_000,
        }
    }
}

/// What the script has used so far of its [`Limits`].
#[derive(Debug, Default, Clone)]
pub(crate) struct Used {
    pub commands: u64,
    pub loop_iterations: u64,
    pub depth: usize,
    pub written: usize,
}
