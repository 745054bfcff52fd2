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
