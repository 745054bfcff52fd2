//! Why a plan cannot be made: [`PlanError`], at the Jailfile line it is
//! about. Among its kinds, [`InputError`] (an answer the fetch phase could
//! not get, kept and reported by the planner at the line that needed it)
//! and [`NotFetched`] (a need the fetch phase was never given: a bug of
//! jbuild, never a reason to fetch).

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use super::needs::Need;
use crate::blame::Blame;
use crate::image::platform::BadPlatform;
use crate::jailfile::Location;

/// Why a need of the plan ([`Need`]) had no answer: the error itself, kept
/// whole as the cause (the report shows its chain; the CLI looks in it for
/// a full disk), and whether the user can fix it (a name, a context file,
/// a release) or it is a fault of jbuild or the system. Cloned cheaply:
/// the fetch phase keeps it, and every pass of a multi-platform build
/// that needs the same thing reports the same error.
#[derive(Clone)]
pub struct InputError {
    user: bool,
    error: Arc<dyn Error + Send + Sync>,
}

impl InputError {
    pub fn new(user: bool, error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        InputError {
            user,
            error: Arc::from(error.into()),
        }
    }

    /// The user's to fix: exit code 1. A `String` makes a plain message.
    pub fn user(error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        InputError::new(true, error)
    }

    /// jbuild's or the system's fault: exit code 2.
    pub fn internal(error: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        InputError::new(false, error)
    }

    /// The error the input gave.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.error
    }
}

impl Blame for InputError {
    fn is_user_error(&self) -> bool {
        self.user
    }
}

impl fmt::Debug for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InputError")
            .field("user", &self.user)
            .field("error", &self.error)
            .finish()
    }
}

/// Shows the input's error as it is, a transparent wrapper: the input
/// error's own causes follow it (not the error again, which would print
/// its line twice).
impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl Error for InputError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

/// The planner needed something the fetch phase was not given to fetch:
/// [`super::needs`](mod@super::needs) and the planner disagree (a jbuild bug, exit 2). The
/// planner has no way to fetch it itself.
#[derive(Debug, thiserror::Error)]
#[error("{need} was not fetched before planning (a jbuild bug: please report it)")]
pub struct NotFetched {
    /// Boxed: a plan error stays small.
    pub need: Box<Need>,
}

impl NotFetched {
    pub(super) fn of(need: Need) -> NotFetched {
        NotFetched {
            need: Box::new(need),
        }
    }
}

impl Blame for NotFetched {
    /// jbuild's fault: exit 2.
    fn is_user_error(&self) -> bool {
        false
    }
}

/// A plan that cannot be made, at the Jailfile line it is about, shown on
/// one line (`Jailfile:2:1: what`); the kind's own causes follow it.
#[derive(Debug)]
pub struct PlanError {
    pub location: Location,
    pub kind: PlanErrorKind,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.kind)
    }
}

impl Error for PlanError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.kind.source()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlanErrorKind {
    #[error("the Jailfile has no FROM line")]
    NoFrom,
    #[error(transparent)]
    Platform(#[from] BadPlatform),
    #[error("stage {0} is not built before this one")]
    StageNotBuilt(usize),
    #[error("COPY --from stage {0} is not built before this one")]
    CopyFromNotBuilt(usize),
    /// A COPY or bind mount from a stage whose root has no layer.
    #[error("stage {0}: that stage made no files (it has no layer), so there is nothing to read")]
    NothingToRead(usize),
    /// A need whose fetch failed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A need the fetch phase was not given.
    #[error(transparent)]
    NotFetched(#[from] NotFetched),
}

impl Blame for PlanError {
    /// Whether the user can fix this (exit code 1): as its kind says.
    fn is_user_error(&self) -> bool {
        self.kind.is_user_error()
    }
}

impl Blame for PlanErrorKind {
    /// Always the recipe's, but for an input that failed by a fault of
    /// jbuild or the system, and a need that was not fetched.
    fn is_user_error(&self) -> bool {
        match self {
            PlanErrorKind::Input(e) => e.is_user_error(),
            PlanErrorKind::NotFetched(_) => false,
            PlanErrorKind::NoFrom
            | PlanErrorKind::Platform(_)
            | PlanErrorKind::StageNotBuilt(_)
            | PlanErrorKind::CopyFromNotBuilt(_)
            | PlanErrorKind::NothingToRead(_) => true,
        }
    }
}
