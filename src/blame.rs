//! Whose mistake an error is: the user's to fix (exit code 1) or a fault of
//! jbuild or the system (exit code 2).
//!
//! Every error type that reaches the command line implements [`Blame`],
//! once, beside its definition, and decides by its variants (and a cause's
//! own `Blame`, an `io::Error`'s kind), never by its message text: a
//! message is for people and changes with them. The CLI turns any `Blame`
//! error into its failure with one conversion, so no command decides for
//! an error type on its own.

/// Whether an error is the user's to fix. See the module docs.
pub trait Blame {
    /// `true`: the recipe, the command line, the input or the environment
    /// the user chose is at fault (a name, a registry that cannot be
    /// reached, refused credentials, a full disk); the user can fix it.
    /// `false`: a fault of jbuild or of the machine.
    fn is_user_error(&self) -> bool;
}

impl<T: Blame + ?Sized> Blame for Box<T> {
    fn is_user_error(&self) -> bool {
        (**self).is_user_error()
    }
}

/// An error with where it happened (or what was being done) put before it
/// on its own line, `what: error`, and after it, optionally, what to do.
/// A wrapper that prints its error: its causes are the error's own causes
/// (the error itself would print its line twice). An `At<io::Error>` is
/// looked for by type where an I/O error's kind decides (a full disk).
#[derive(Debug)]
pub struct At<E> {
    pub at: String,
    pub error: E,
    /// Said after the error (`; give a regular file …`), or empty.
    pub then: String,
}

impl<E> At<E> {
    pub fn new(at: impl Into<String>, error: E) -> At<E> {
        At {
            at: at.into(),
            error,
            then: String::new(),
        }
    }

    /// With `then` said after the error.
    pub fn then(mut self, then: impl Into<String>) -> At<E> {
        self.then = then.into();
        self
    }
}

impl<E: std::fmt::Display> std::fmt::Display for At<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}{}", self.at, self.error, self.then)
    }
}

impl<E: std::error::Error> std::error::Error for At<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl<E: Blame> Blame for At<E> {
    fn is_user_error(&self) -> bool {
        self.error.is_user_error()
    }
}
