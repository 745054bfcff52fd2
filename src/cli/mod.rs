//! Command-line parsing (raw flags, exactly as typed) and dispatch to one
//! module per group of commands. Every command returns `Result<(), Failure>`;
//! `main` prints the failure once, as `error: ...` followed by its causes,
//! and maps it to the exit code.

// `println!` and `print!` for results, through `jbuild::report::stdout`:
// a closed pipe ends the output quietly, another write error fails the
// command.

/// `println!` for results.
macro_rules! outln {
    () => {
        jbuild::report::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        jbuild::report::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for results.
macro_rules! out {
    ($($arg:tt)*) => {
        jbuild::report::stdout::write(format_args!($($arg)*))
    };
}

mod bastille;
mod build;
mod check;
mod common;
mod create;
mod diff;
mod docs;
mod images;
mod login;
mod manifest;
mod registry;
mod remote;
mod run;
mod sbom;
mod system;
mod transfer;
mod trust;
mod verify;

use jbuild::blame::Blame;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use jbuild::config::{Paths, Settings};
use jbuild::image::LayerPolicy;
use jbuild::keychain::redact;
use jbuild::report::{JsonReporter, PlainReporter, Reporter, SilentReporter, TtyReporter};
use jbuild::snapshot::choose::{choose, Chosen};
use jbuild::snapshot::Snapshotter;
use jbuild::store::Store;

/// Exit codes: 0 success, 1 the user's mistake (recipe, arguments, input),
/// 2 an internal fault or a failure of the system.
pub const EXIT_USER: i32 = 1;
pub const EXIT_INTERNAL: i32 = 2;
/// Every exit code and what it means: jbuild(1)'s EXIT STATUS and the
/// README say the same, and `tests/it/cli/messages.rs` holds each.
pub const EXIT_CODES: [(i32, &str); 3] = [
    (
        0,
        "Success (for check: nothing is damaged; for verify: the rebuild gives the same image).",
    ),
    (
        EXIT_USER,
        "The user's to fix: a mistake in the recipe, the command line (an unknown flag, a missing \
         argument, a bad value) or the input, or in the environment (a registry that cannot be \
         reached, failing TLS, refused credentials, a full disk); for check: damage found; for \
         verify: the rebuild differs; for diff: the images differ.",
    ),
    (
        EXIT_INTERNAL,
        "An internal fault: a bug to report, or output that could not be written; for diff: any \
         trouble, as diff(1) (an image not found, a damaged layer).",
    ),
];

/// What `--version` says: the version, the commit built (`unknown` outside
/// a git checkout) and the target (both from `build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("JBUILD_BUILD_COMMIT"),
    ", target ",
    env!("JBUILD_BUILD_TARGET"),
    ")"
);

/// The heading the flags every command takes are listed under.
const GLOBAL: &str = "Global options";

#[derive(Parser, Debug)]
#[command(
    name = "jbuild",
    version = VERSION,
    about = "Build FreeBSD jail templates from Jailfiles into layered snapshots and OCI images",
    long_about = "jbuild builds jail templates from plain-text recipes (Jailfiles), caches every step as a \
                  snapshot, and exports the result as a standard OCI image that skopeo, podman and any \
                  registry accept.\n\nState lives under $JBUILD_ROOT (default /var/db/jbuild for root, \
                  else $XDG_DATA_HOME/jbuild).",
    after_help = "Examples:\n  jbuild build -t web:1.0 Jailfile.examples/static-site\n  jbuild images\n  jbuild export web:1.0 oci-archive:web.tar"
)]
pub struct Cli {
    /// Where jbuild keeps its store and snapshots.
    #[arg(long, global = true, help_heading = GLOBAL, env = "JBUILD_ROOT", value_name = "DIR")]
    root: Option<PathBuf>,
    /// Snapshot backend: `zfs` (datasets under [zfs] dataset or
    /// $JBUILD_ZFS_DATASET), `overlay` (overlayfs layers, Linux), `dir`
    /// (plain directories, anywhere), or `auto` (zfs when a dataset is
    /// configured and usable, else overlay where this process can mount
    /// one, else dir). Default:
    /// `backend =` in the configuration file, else auto. `jbuild info` says
    /// which one is used and why.
    #[arg(long, global = true, help_heading = GLOBAL, env = "JBUILD_BACKEND", value_name = "BACKEND", value_parser = ["auto", "zfs", "overlay", "dir"])]
    backend: Option<String>,
    /// Print nothing but results and errors.
    #[arg(short, long, global = true, help_heading = GLOBAL)]
    quiet: bool,
    /// Print machine-readable JSON (events, then a result object).
    #[arg(long, global = true, help_heading = GLOBAL)]
    json: bool,
    /// Debug logging to standard error (or set RUST_LOG).
    #[arg(long, global = true, help_heading = GLOBAL)]
    debug: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build an image from a Jailfile and a build context directory.
    // Boxed: build has many more flags than any other command.
    Build(Box<build::BuildArgs>),
    /// List the images in the local store.
    #[command(alias = "ls")]
    Images(images::ImagesArgs),
    /// Show an image's manifest and configuration (in the store, or in a
    /// registry without pulling it: `docker://REF`).
    Inspect(images::InspectArgs),
    /// Show the history (one line per instruction) of an image.
    History(images::HistoryArgs),
    /// Print an image's software bill of materials (SPDX or CycloneDX) from
    /// its pkg database.
    Sbom(sbom::SbomArgs),
    /// Show what changed between two images: files, then packages.
    Diff(diff::DiffArgs),
    /// Give an image another name.
    Tag(images::TagArgs),
    /// Remove image names (`prune` then frees what no name needs).
    #[command(alias = "rm")]
    Rmi(images::RmiArgs),
    /// Remove blobs and snapshots that no image needs.
    Prune(images::PruneArgs),
    /// Check the store and snapshots for damage and leftovers (`--repair` removes them).
    Check(check::CheckArgs),
    /// What jbuild's state takes on disk (`system df`).
    System(system::SystemArgs),
    /// Write an image to an OCI layout directory or archive.
    Export(transfer::ExportArgs),
    /// Read an image from an OCI layout directory or archive into the store.
    Import(transfer::ImportArgs),
    /// Write an image to an OCI archive file, or to standard output.
    Save(transfer::SaveArgs),
    /// Read an image from an OCI archive file, or standard input, into the
    /// store, under the name it carries.
    Load(transfer::LoadArgs),
    /// Send an image from the store to a registry (or an OCI layout or archive).
    Push(registry::PushArgs),
    /// Fetch an image from a registry into the store.
    Pull(registry::PullArgs),
    /// List the tags of a repository in a registry.
    Tags(remote::TagsArgs),
    /// Copy an image between any two places: registries, OCI layouts and archives, the store.
    Copy(registry::CopyArgs),
    /// Make, edit and push manifest lists (one image per platform).
    Manifest(manifest::ManifestArgs),
    /// Show where jbuild keeps its state and what it will use.
    Info,
    /// Print the Jailfile a Bastille template translates to.
    Convert(bastille::ConvertArgs),
    /// Make a jail from an image: its root and a jail.conf entry.
    Create(create::CreateArgs),
    /// Run an image's program, or a command, in it on this terminal (a jail
    /// on FreeBSD, namespaces on Linux); exits with its exit code.
    Run(run::RunArgs),
    /// Rebuild an image from the recipe it carries, in a scratch root, and
    /// compare: the first layer and file that differ.
    Verify(verify::VerifyArgs),
    /// Check credentials against a registry and keep them for push and pull.
    Login(login::LoginArgs),
    /// Forget the credentials kept for a registry.
    Logout(login::LogoutArgs),
    /// Write a new key pair cosign can use (cosign.key, cosign.pub).
    GenerateKeyPair(trust::GenerateKeyPairArgs),
    /// Sign an image as cosign does (in a registry, or in the store).
    Sign(trust::SignArgs),
    /// Check an image's cosign signatures against a public key.
    VerifySignature(trust::VerifySignatureArgs),
    /// Check an image's cosign attestations (in-toto, DSSE) against a public key.
    VerifyAttestation(trust::VerifyAttestationArgs),
    /// Print a shell completion script (bash, zsh, fish).
    Completion(docs::CompletionArgs),
    /// Write the man pages (or print jbuild(1), or the Markdown reference).
    Man(docs::ManArgs),
}

/// A failed command: what went wrong, and whose mistake it was.
pub struct Failure {
    pub user: bool,
    pub error: anyhow::Error,
}

impl Failure {
    pub fn user(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            user: true,
            error: error.into(),
        }
    }
    pub fn internal(error: impl Into<anyhow::Error>) -> Self {
        Failure {
            user: false,
            error: error.into(),
        }
    }
}

/// The one way a library error becomes a failure: its type says whose
/// mistake it is ([`Blame`]), so `?` on any of them is enough.
impl<E> From<E> for Failure
where
    E: Blame + std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        Failure {
            user: error.is_user_error(),
            error: error.into(),
        }
    }
}

impl Failure {
    /// A library error with what the command was doing put first; still
    /// blamed by the error's type.
    pub fn context<E, C>(error: E, context: C) -> Self
    where
        E: Blame + std::error::Error + Send + Sync + 'static,
        C: std::fmt::Display + Send + Sync + 'static,
    {
        Failure {
            user: error.is_user_error(),
            error: anyhow::Error::new(error).context(context),
        }
    }
}

pub type CmdResult = Result<(), Failure>;

/// What every command gets: the parsed global flags and the state paths.
pub struct Ctx {
    pub paths: Paths,
    pub quiet: bool,
    pub json: bool,
    /// `--backend` as given (`None`: the configuration file's, else auto).
    pub backend: Option<String>,
    /// The configuration file's settings (defaults when there is none).
    pub settings: Settings,
}

impl Ctx {
    /// Refuses when one of jbuild's own places `rels` under the root is a
    /// symlink or a file (nothing is read, written or removed through it:
    /// `jbuild::fsutil::places`); a missing one is fine (made when used).
    pub fn check_places(&self, rels: &[&str]) -> Result<(), Failure> {
        for rel in rels {
            jbuild::fsutil::places::existing_own_dir(self.paths.root(), rel)?;
        }
        Ok(())
    }

    pub fn store(&self) -> Result<Store, Failure> {
        std::fs::create_dir_all(self.paths.root()).map_err(|e| {
            Failure::user(anyhow::anyhow!(
                "cannot create {}: {e}",
                self.paths.root().display()
            ))
        })?;
        self.check_places(&["store"])?;
        // Mounts a killed process left (a pull's or a build's step on the
        // overlay backend) are taken down by the next command.
        jbuild::snapshot::choose::unmount_dead(&self.paths);
        Store::open(&self.paths.store()).map_err(|e| match e {
            jbuild::store::StoreError::Corrupt { .. } => Failure::internal(
                anyhow::Error::new(e)
                    .context("the image store is damaged: `jbuild check` says what to do"),
            ),
            e => Failure::internal(e),
        })
    }

    /// The descriptor of a stored image by what the user typed
    /// ([`Store::lookup`]: a name as docker resolves it, a digest or an ID
    /// prefix); a name the store lacks, or an ambiguous prefix, is the
    /// user's mistake.
    pub fn resolve_image(
        store: &Store,
        reference: &str,
    ) -> Result<oci_spec::image::Descriptor, Failure> {
        store
            .find(reference)
            .map(|found| found.descriptor)
            .map_err(Failure::from)
    }

    /// How image layers are unpacked: the configuration file's `[layers]`,
    /// with the command's `--allow-setuid` and `--allow-devices` on top.
    /// How much of a layer, or of an archive, jbuild reads (`[layers]`).
    pub fn layer_limits(&self) -> jbuild::layer::Limits {
        jbuild::layer::Limits::from_settings(&self.settings.layers)
    }

    pub fn layer_policy(&self, allow_setuid: bool, allow_devices: bool) -> LayerPolicy {
        LayerPolicy::from_settings(&self.settings.layers, allow_setuid, allow_devices)
    }

    /// The snapshot backend the flags and the configuration call for.
    pub fn snapshotter(&self) -> Result<Box<dyn Snapshotter>, Failure> {
        self.backend().map(|c| c.snapshotter)
    }

    /// The snapshot backend, opened only to be looked at (`jbuild check`):
    /// nothing is written ([`jbuild::snapshot::choose::inspect`]).
    pub fn inspector(&self) -> Result<Box<dyn Snapshotter>, Failure> {
        jbuild::snapshot::choose::inspect(self.backend.as_deref(), &self.settings, &self.paths)
            .map(|c| c.snapshotter)
            .map_err(Failure::from)
    }

    /// The snapshot backend chosen, and why (for `jbuild info`).
    pub fn backend(&self) -> Result<Chosen, Failure> {
        choose(self.backend.as_deref(), &self.settings, &self.paths).map_err(Failure::from)
    }

    /// The reporter the flags and the terminal call for.
    pub fn reporter(&self) -> Box<dyn Reporter> {
        if self.json {
            Box::new(JsonReporter::stdout())
        } else if self.quiet {
            Box::new(SilentReporter)
        } else if std::io::stderr().is_terminal() {
            Box::new(TtyReporter::new())
        } else {
            Box::new(PlainReporter::stderr())
        }
    }
}

pub fn main() -> i32 {
    // A password written into an image reference (`user:pw@host/...`,
    // refused when parsed) is kept out of everything printed.
    for arg in std::env::args().skip(1) {
        if let Some((user, password)) = jbuild::store::name::userinfo(&arg) {
            redact::remember(Some(user), password);
        }
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    let filter = if cli.debug {
        "jbuild=debug".to_string()
    } else {
        // rustls' platform verifier logs a refused certificate at ERROR
        // level; the transport reports that error itself, once.
        std::env::var("RUST_LOG").unwrap_or_else(|_| "warn,rustls_platform_verifier=off".into())
    };
    tracing_subscriber::fmt()
        .with_writer(|| ScrubbedStderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .without_time()
        .init();
    // A user without root but with subordinate ids builds in a user
    // namespace of jbuild's own: jbuild runs again there and this one
    // waits (exec::rootless). Not for what needs no store (completions,
    // man pages, credentials) nor for `info`, which tells the mode.
    #[cfg(target_os = "linux")]
    if !matches!(
        cli.command,
        Cmd::Completion(_) | Cmd::Man(_) | Cmd::Login(_) | Cmd::Logout(_) | Cmd::Info
    ) {
        use jbuild::exec::rootless;
        if let rootless::Mode::Rootless(mapping) = rootless::mode() {
            let state = cli
                .root
                .clone()
                .map(Paths::at)
                .unwrap_or_else(Paths::from_env);
            return match rootless::enter(&mapping, state.root()) {
                Ok(code) => code,
                Err(e) => {
                    report(&anyhow::Error::new(e));
                    EXIT_USER
                }
            };
        }
    }
    let settings = match Settings::load() {
        Ok(s) => s,
        // Completions and man pages need no configuration: a broken file
        // (fixed with the man page's help) does not stop them.
        Err(_) if matches!(cli.command, Cmd::Completion(_) | Cmd::Man(_)) => Settings::default(),
        Err(e) => {
            report(&anyhow::Error::new(e));
            return EXIT_USER;
        }
    };
    let ctx = Ctx {
        paths: cli
            .root
            .clone()
            .map(Paths::at)
            .unwrap_or_else(Paths::from_env),
        quiet: cli.quiet,
        json: cli.json,
        backend: cli.backend.clone(),
        settings,
    };
    let result = match cli.command {
        Cmd::Build(a) => build::run(&ctx, *a),
        Cmd::Images(a) => images::images(&ctx, a),
        Cmd::Inspect(a) => images::inspect(&ctx, a),
        Cmd::History(a) => images::history(&ctx, a),
        Cmd::Sbom(a) => sbom::run(&ctx, a),
        Cmd::Diff(a) => {
            // As diff(1): 0 the same, 1 different, 2 trouble.
            return match diff::run(&ctx, a) {
                Ok(()) | Err(_) if jbuild::report::stdout::failure().is_some() => EXIT_INTERNAL,
                Ok(()) => 0,
                Err(f) if f.error.is::<diff::Differ>() => EXIT_USER,
                Err(f) => {
                    report(&f.error);
                    EXIT_INTERNAL
                }
            };
        }
        Cmd::Tag(a) => images::tag(&ctx, a),
        Cmd::Rmi(a) => images::rmi(&ctx, a),
        Cmd::Prune(a) => images::prune(&ctx, a),
        Cmd::Check(a) => check::run(&ctx, a),
        Cmd::System(a) => system::run(&ctx, a),
        Cmd::Export(a) => transfer::export(&ctx, a),
        Cmd::Import(a) => transfer::import(&ctx, a),
        Cmd::Save(a) => transfer::save(&ctx, a),
        Cmd::Load(a) => transfer::load(&ctx, a),
        Cmd::Push(a) => registry::push(&ctx, a),
        Cmd::Pull(a) => registry::pull(&ctx, a),
        Cmd::Copy(a) => registry::copy(&ctx, a),
        Cmd::Tags(a) => remote::tags(&ctx, a),
        Cmd::Manifest(a) => manifest::run(&ctx, a),
        Cmd::Info => images::info(&ctx),
        Cmd::Convert(a) => bastille::convert(&ctx, a),
        Cmd::Create(a) => create::run(&ctx, a),
        Cmd::Run(a) => match run::run(&ctx, a) {
            // The command's own failure: its exit code, no error line.
            Ok(code) if code != 0 && jbuild::report::stdout::failure().is_none() => return code,
            Ok(_) => Ok(()),
            Err(f) => Err(f),
        },
        Cmd::Verify(a) => verify::run(&ctx, a),
        Cmd::Login(a) => login::login(&ctx, a),
        Cmd::Logout(a) => login::logout(&ctx, a),
        Cmd::GenerateKeyPair(a) => trust::generate_key_pair(&ctx, a),
        Cmd::Sign(a) => trust::sign(&ctx, a),
        Cmd::VerifySignature(a) => trust::verify_signature(&ctx, a),
        Cmd::VerifyAttestation(a) => trust::verify_attestation(&ctx, a),
        Cmd::Completion(a) => docs::completion(&ctx, a),
        Cmd::Man(a) => docs::man(&ctx, a),
    };
    if let Some(e) = jbuild::report::stdout::failure() {
        eprintln!("error: cannot write to standard output: {e}");
    }
    match result {
        // What the command printed did not all reach standard output.
        Ok(()) if jbuild::report::stdout::failure().is_some() => EXIT_INTERNAL,
        Ok(()) => 0,
        Err(f) => {
            report(&f.error);
            if let Some(full) = common::DestinationFull::find(&f.error) {
                // The place the user named to write to is full: the store
                // is not, and `prune` would free nothing there.
                eprintln!(
                    "  = the filesystem holding {} is full: free space there, or name a \
                     place on another filesystem, and run the command again",
                    full.place()
                );
                return EXIT_USER;
            }
            if disk_full(&f.error) {
                // Not a fault of jbuild's: the user frees space and retries.
                eprintln!(
                    "  = no space left on the filesystem holding {}: free space there \
                     (`jbuild prune` removes what no image uses) and run the command again",
                    ctx.paths.root().display()
                );
                return EXIT_USER;
            }
            if f.user {
                EXIT_USER
            } else {
                EXIT_INTERNAL
            }
        }
    }
}

/// Whether `e` comes from a full disk (ENOSPC, or a quota: EDQUOT), told
/// by the error's kind or number, never by its text (which another
/// program, a build step, may have printed for its own reasons). Unless a
/// command said which place it was writing ([`common::DestinationFull`]),
/// the full place is the state root: store, snapshots and scratch space.
pub(crate) fn disk_full(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let io = c.downcast_ref::<std::io::Error>().or_else(|| {
            c.downcast_ref::<jbuild::blame::At<std::io::Error>>()
                .map(|at| &at.error)
        });
        io.is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) || io
                .raw_os_error()
                .is_some_and(|n| n == libc::ENOSPC || n == libc::EDQUOT)
        })
    })
}

/// `error: <top>` then `  caused by: <each source>`. No error prints its
/// own source (a wrapper that shows its inner error is transparent), so
/// every cause is printed as it is; `tests/it/cli/chains.rs` fails on a
/// line that repeats one before it.
///
/// Every line is scrubbed of the secrets jbuild read (a registry may
/// repeat the credentials it was sent in its error).
fn report(e: &anyhow::Error) {
    eprintln!("error: {}", redact::scrub(&e.to_string()));
    for cause in e.chain().skip(1) {
        eprintln!("  caused by: {}", redact::scrub(&cause.to_string()));
    }
}

/// Standard error for log lines, scrubbed of the secrets jbuild read.
struct ScrubbedStderr;

impl std::io::Write for ScrubbedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = redact::scrub(&String::from_utf8_lossy(buf));
        std::io::stderr().write_all(text.as_bytes())?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// `--label` and `--annotation` values (build and `manifest add`): `K=V`,
/// K not empty.
/// What clap found on the command line. `--help` and `--version` print to
/// standard output and succeed; anything else (an unknown flag, a missing
/// argument, a bad value) is the user's mistake: exit 1, as every other one
/// is (clap's own default would be 2, which jbuild keeps for its faults).
fn usage(e: &clap::Error) -> i32 {
    use clap::error::ErrorKind;
    let shown = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => match shown {
            // `jbuild --help | head -1`: the reader went away, nothing is lost.
            Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
                report(&anyhow::Error::new(err).context("cannot write to standard output"));
                EXIT_INTERNAL
            }
            _ => 0,
        },
        _ => EXIT_USER,
    }
}

fn parse_pairs(
    flag: &str,
    raw: &[String],
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let mut out = std::collections::BTreeMap::new();
    for a in raw {
        match a.split_once('=') {
            Some((k, v)) if !k.is_empty() => {
                out.insert(k.to_string(), v.to_string());
            }
            _ => {
                return Err(Failure::user(anyhow::anyhow!(
                    "{flag} `{a}`: write {flag} NAME=VALUE (the name may not be empty)"
                )))
            }
        }
    }
    Ok(out)
}
