//! `jbuild verify`: rebuild an image from the recipe it carries and
//! compare (the work is `engine::verify`'s).

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::{CmdResult, Ctx, Failure};
use jbuild::engine::provenance::Provenance;
use jbuild::engine::verify::{self, Difference, Verdict, VerifyEnv, VerifyOptions};
use jbuild::engine::{self, FreeBsdEnv};
use jbuild::release::ReleaseSource;
use jbuild::report::JsonReporter;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The image to verify: a name or ID in the store, or `docker://REF`
    /// (fetched into the scratch root only, not stored).
    #[arg(value_name = "IMAGE|docker://REF")]
    image: String,
    /// The build context to rebuild from (the checkout the image was
    /// built from).
    #[arg(long, value_name = "DIR")]
    context: PathBuf,
    /// A build argument of the original build (over the provenance's).
    #[arg(long = "build-arg", value_name = "K=V")]
    build_args: Vec<String>,
    /// The stage the original build built (default: the provenance's,
    /// else the last).
    #[arg(long, value_name = "STAGE")]
    target: Option<String>,
    /// A build secret for `RUN --mount=type=secret,id=ID`, as `build
    /// --secret` takes it; may be given several times.
    #[arg(long = "secret", value_name = "id=ID,src=FILE|env=VAR")]
    secrets: Vec<String>,
    /// The build's provenance (what `build --provenance-file` wrote): its
    /// build arguments, target and base image digests are used.
    #[arg(long, value_name = "FILE")]
    provenance: Option<PathBuf>,
    /// Without --provenance, the provenance attached to the image (`build
    /// --provenance`) is used when it has one; with --key, only one this
    /// public key verifies (an attached one that fails is an error).
    #[arg(long, value_name = "PUB")]
    key: Option<PathBuf>,
    /// How `docker://REF` and FROM images the store lacks reach registries.
    #[command(flatten)]
    registry: super::common::access::RegistryArgs,
}

fn read_provenance(file: &PathBuf) -> Result<Provenance, Failure> {
    let bytes = std::fs::read(file).map_err(|e| {
        let user = jbuild::fsutil::path_at_fault(&e);
        let error = anyhow::Error::new(e).context(format!("--provenance {}", file.display()));
        Failure { user, error }
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::user(anyhow::Error::new(e).context(format!(
            "--provenance {}: not a provenance predicate jbuild wrote (build --provenance-file)",
            file.display()
        )))
    })
}

pub fn run(ctx: &Ctx, args: VerifyArgs) -> CmdResult {
    if !args.context.is_dir() {
        return Err(Failure::user(anyhow!(
            "--context `{}` is not a directory",
            args.context.display()
        )));
    }
    let provenance = match &args.provenance {
        Some(file) => Some(read_provenance(file)?),
        None => attached(ctx, &args)?,
    };
    let store = ctx.store()?;
    // Scratch space in the root's own `tmp/`, never through a symlink.
    let tmp = jbuild::fsutil::places::own_dir(ctx.paths.root(), "tmp")?;
    ctx.check_places(&["cache", "cache/mounts", "cache/freebsd"])?;
    let scratch = tempfile::Builder::new()
        .prefix("verify-")
        .tempdir_in(&tmp)
        .map_err(Failure::internal)?;
    let puller = jbuild::transport::RegistryPuller {
        options: args.registry.options(ctx)?,
        jobs: 4,
    };
    let scratch_snapshots =
        jbuild::snapshot::dir::DirSnapshotter::new(scratch.path().join("snapshots"))
            .map_err(Failure::internal)?;
    let reporter = ctx.reporter();
    let settings = &ctx.settings;
    let http = std::sync::Arc::new(jbuild::transport::http::Http::new(puller.options.clone()));
    let env = VerifyEnv {
        store: &store,
        reporter: reporter.as_ref(),
        freebsd: FreeBsdEnv {
            release: Some(
                ReleaseSource::new(&ctx.paths, &settings.freebsd).with_http(http.clone()),
            ),
            pkg_cache: Some(ctx.paths.pkg_cache()),
            pkg_repos_dir: settings.pkg.repos_dir.clone(),
            pkg_offline: settings.pkg.offline,
            pkg_installer: engine::freebsd::PkgInstaller::from_setting(
                settings.pkg.installer.as_deref(),
            )
            .map_err(|e| Failure::user(anyhow!(e)))?,
            pkg_scripts: settings.pkg.scripts,
            package_cache: Some(ctx.paths.package_cache()),
            allowed_jail_params: settings.freebsd.allow_jail_params.clone(),
            http: http.clone(),
            pkg_resolver: jbuild::pkg::mirror::Resolver::of_servers(&settings.pkg.nameservers)
                .map_err(|e| Failure::user(anyhow!(e)))?,
            pkg_conf: jbuild::pkg::pkg_conf::Overrides {
                files_ignore_glob: settings.pkg.files_ignore_glob.clone(),
                files_ignore_regex: settings.pkg.files_ignore_regex.clone(),
            },
        },
        layer_policy: ctx.layer_policy(false, false),
        registry: Some(&puller),
        scratch_snapshots: &scratch_snapshots,
        add: Some(
            engine::AddPlaces::new(ctx.paths.root().to_path_buf(), http.clone())
                .with_git_credentials(engine::GitCredentials {
                    keychain: puller.options.keychain.clone(),
                    secrets: engine::read_secrets(&args.secrets).map_err(Failure::user)?,
                }),
        ),
    };
    let opts = VerifyOptions {
        image: args.image.clone(),
        context: args.context.clone(),
        build_args: super::common::parse_build_args(&args.build_args)?,
        target: args.target.clone(),
        provenance,
        secrets: engine::read_secrets(&args.secrets)?,
        scratch: scratch.path().to_path_buf(),
    };
    let verdict = verify::verify(&env, &opts).map_err(Failure::from)?;
    drop(reporter);
    print(ctx, &args.image, &verdict);
    if verdict.is_same() {
        return Ok(());
    }
    Err(Failure::user(anyhow!(
        "the rebuild of {} differs from it (docs/verify.md says what makes a rebuild differ, and how to pin it)",
        args.image
    )))
}

/// The provenance attached to the image, verified with --key when given.
fn attached(ctx: &Ctx, args: &VerifyArgs) -> Result<Option<Provenance>, Failure> {
    use super::common::access::place;
    let key = args
        .key
        .as_deref()
        .map(jbuild::trust::read_public_key)
        .transpose()
        .map_err(Failure::from)?;
    let mut store = None;
    let place = match place(ctx, &mut store, &args.image, &args.registry) {
        Ok(p) => p,
        // An image without a name has nothing kept beside it; one that is
        // missing is the rebuild's to report.
        Err(_) if key.is_none() => return Ok(None),
        Err(f) => return Err(f),
    };
    engine::attest::attached_provenance(place.as_ref(), key.as_ref()).map_err(Failure::from)
}

fn print(ctx: &Ctx, image: &str, v: &Verdict) {
    if ctx.json {
        JsonReporter::stdout().emit(json!({
            "event": "result",
            "image": image,
            "same": v.is_same(),
            "expected": v.expected.to_string(),
            "rebuilt": v.rebuilt.to_string(),
            "difference": v.difference,
        }));
        return;
    }
    if v.is_same() {
        outln!(
            "verified: {image} rebuilt to the same manifest {}",
            v.expected
        );
        return;
    }
    outln!(
        "differs: {image} is {}, the rebuild is {}",
        v.expected,
        v.rebuilt
    );
    let digest = |d: &Option<jbuild::digest::Digest>| {
        d.as_ref()
            .map_or("(no such layer)".to_string(), |d| d.to_string())
    };
    match &v.difference {
        Some(Difference::Layer {
            index,
            expected,
            rebuilt,
            step,
            file,
        }) => {
            match step {
                Some(s) => outln!("first differing layer: {index}, made by `{s}`"),
                None => outln!("first differing layer: {index}"),
            }
            outln!("  image diff ID:   {}", digest(expected));
            outln!("  rebuild diff ID: {}", digest(rebuilt));
            if let Some(f) = file {
                outln!("first differing file: {} ({})", f.path, f.what);
            }
        }
        Some(Difference::Config { path }) => {
            outln!("every layer is the same; the config differs at `{path}`")
        }
        Some(Difference::Manifest { path }) => {
            outln!("layers and config are the same; the manifest differs at `{path}`")
        }
        None => {}
    }
}
