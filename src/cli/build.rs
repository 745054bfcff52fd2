//! `jbuild build`.

use jbuild::blame::Blame;
use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use super::common::access::{PolicyArg, RegistryArgs};
use super::common::context;
use super::common::keys::signing_key;
use super::common::parse_build_args;
use super::common::template::{translate, TemplateArgs};
use super::{CmdResult, Ctx, Failure};
use jbuild::bastille::Converted;
use jbuild::engine::attest::Attest;
use jbuild::engine::publish::{PushOptions, Pushed};
use jbuild::engine::request::{self, BuildRequest, BuildSummary, RequestError};
use jbuild::engine::{self, BuildEnv, BuildOptions, FreeBsdEnv, PullPolicy};
use jbuild::image::Platform;
use jbuild::jailfile;
use jbuild::layer::Compression;
use jbuild::release::ReleaseSource;
use jbuild::report::JsonReporter;
use jbuild::store::ImageName;
use jbuild::transport::{Location, RegistryOptions};

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The recipe (default: DIR/Jailfile, else DIR/Containerfile, else
    /// DIR/Dockerfile); `-` reads it from standard input (its INCLUDEs are
    /// then relative to DIR).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// Name (and tag) for the image; may be given several times.
    #[arg(short = 't', long = "tag", value_name = "NAME[:TAG]")]
    tags: Vec<String>,
    /// Set a build argument declared with ARG; `K` alone takes the value of
    /// the environment variable K.
    #[arg(long = "build-arg", value_name = "K=V")]
    build_args: Vec<String>,
    /// Build arguments from a file: one K=V a line, `#` comments and blank
    /// lines ignored; --build-arg wins over it. May be given several times.
    #[arg(long = "build-arg-file", value_name = "FILE")]
    build_arg_files: Vec<PathBuf>,
    /// Build this stage (its AS name, or its number from 0) and the stages
    /// it needs, instead of the last one.
    #[arg(long, value_name = "STAGE")]
    target: Option<String>,
    /// A label for the image's config, over the Jailfile's LABELs (no step
    /// runs again for it); may be given several times.
    #[arg(long = "label", value_name = "K=V")]
    labels: Vec<String>,
    /// An annotation for the image's manifest; may be given several times.
    #[arg(long = "annotation", value_name = "K=V")]
    annotations: Vec<String>,
    /// Also offer the image's JAIL parameters as manifest annotations
    /// `org.freebsd.jail.<param>` (what OCI runtimes on FreeBSD read),
    /// besides the config labels every image carries (docs/jails.md).
    #[arg(long)]
    jail_annotations: bool,
    /// Write the image's digest (`sha256:…`, what `jbuild images` shows
    /// and `jbuild inspect` takes) to FILE.
    #[arg(long, value_name = "FILE")]
    iidfile: Option<PathBuf>,
    /// Write the build's SLSA provenance predicate (v0.2: the Jailfile's
    /// digest, build arguments, base images, context digest and step cache
    /// keys; never a secret) to FILE, as `cosign attest --type
    /// slsaprovenance --predicate FILE` takes it (docs/verify.md).
    #[arg(long = "provenance-file", value_name = "FILE")]
    provenance_file: Option<PathBuf>,
    /// Attest the build's SLSA provenance (the predicate --provenance-file
    /// writes) about the image, signed with --sign-with as `cosign attest
    /// --type slsaprovenance` signs, kept beside the image as
    /// `sha256-<digest>.att` and pushed with it (docs/trust.md). Without
    /// --sign-with it is unsigned: `jbuild verify` reads it, cosign does not.
    #[arg(long)]
    provenance: bool,
    /// Attest the image's SBOM (SPDX 2.3, as `jbuild sbom` prints it),
    /// signed with --sign-with as `cosign attest --type spdxjson` signs,
    /// beside the image as --provenance is.
    #[arg(long)]
    sbom: bool,
    /// The private key that signs --provenance and --sbom: cosign's
    /// encrypted key (password from $COSIGN_PASSWORD, else asked on a
    /// terminal), or a PKCS#8 or EC PEM key.
    #[arg(long, value_name = "KEY")]
    sign_with: Option<PathBuf>,
    /// When to fetch FROM images from their registry: `missing` (default:
    /// when the store lacks them), `always` (check for a newer one; bare
    /// --pull), `never` (fail if the store lacks one; nothing is asked of
    /// any registry).
    #[arg(long, value_name = "POLICY", num_args = 0..=1, require_equals = true,
          default_missing_value = "always")]
    pull: Option<String>,
    /// After the build, push every -t name to its registry (as `jbuild
    /// push NAME` does).
    #[arg(long)]
    push: bool,
    /// A build secret for `RUN --mount=type=secret,id=ID`: `id=ID,src=FILE`
    /// or `id=ID,env=VAR`; may be given several times. It reaches no
    /// layer, history, cache key, log or output.
    #[arg(long = "secret", value_name = "id=ID,src=FILE|env=VAR")]
    secrets: Vec<String>,
    /// Run every step, using no cached result.
    #[arg(long)]
    no_cache: bool,
    /// Parse, validate and plan the recipe, running no step: print each
    /// problem as FILE:LINE:COL: error|warning: ... (with --json, one JSON
    /// document), and exit 1 when the build would fail.
    #[arg(long)]
    check: bool,
    /// The image's platform, e.g. freebsd/amd64 (default: FROM's, the base
    /// image's, or freebsd on this host's architecture). Several, comma
    /// separated (freebsd/amd64,freebsd/arm64), build one image each, into
    /// the list --manifest names.
    #[arg(long, value_name = "OS/ARCH[,...]", value_delimiter = ',')]
    platform: Vec<String>,
    /// Add the image (one per --platform) to this manifest list, made if
    /// missing; an image of the same platform in it is replaced.
    #[arg(long, value_name = "NAME")]
    manifest: Option<String>,
    /// Layer compression.
    #[arg(long, default_value = "gzip", value_parser = ["gzip", "zstd"])]
    compression: String,
    /// FreeBSD release mirror for `FROM freebsd:<release>` (default: the
    /// configuration's [freebsd] mirror, else https://download.freebsd.org/releases).
    #[arg(long, value_name = "URL")]
    mirror: Option<String>,
    /// Distribution sets to extract after base for `FROM freebsd:<release>`,
    /// e.g. `lib32` or `lib32,src`; for a pkgbase base, sets installed
    /// after [freebsd] pkgbase_sets (FreeBSD-set-NAME).
    #[arg(long, value_name = "SET,...", value_delimiter = ',')]
    sets: Vec<String>,
    /// What `FROM freebsd:<release>` is made of: the release's
    /// distribution sets, or the pkgbase repository's packages installed
    /// by jbuild's own installer on any host; auto takes sets up to 15 and
    /// pkgbase from 16 (default: [freebsd] base, else auto).
    #[arg(long, value_name = "BASE", value_parser = ["auto", "sets", "pkgbase"])]
    freebsd_base: Option<String>,
    /// A directory of pkg(8) repository configurations (*.conf) to use at
    /// /usr/local/etc/pkg/repos during PKG steps (default: [pkg] repos_dir).
    #[arg(long, value_name = "DIR")]
    pkg_repos: Option<PathBuf>,
    /// Do not ask package repositories whether their catalogue changed:
    /// PKG steps are keyed on the repository configuration only.
    #[arg(long)]
    pkg_offline: bool,
    /// Allow a JAIL parameter that weakens the build jail (allow.mount,
    /// allow.raw_sockets, devfs_ruleset=0, ...); may be given several times.
    #[arg(long = "allow-jail-param", value_name = "NAME")]
    allow_jail_params: Vec<String>,
    /// Push every step's result to this registry repository (no tag), so
    /// builds elsewhere can use it with --cache-from (docs/cache.md).
    #[arg(long = "cache-to", value_name = "REPO")]
    cache_to: Option<String>,
    /// Before running a step this machine has no result for, look it up
    /// in this registry repository (no tag); may be given several times.
    #[arg(long = "cache-from", value_name = "REPO")]
    cache_from: Vec<String>,
    /// The build context: COPY sources are taken from here. A directory
    /// (a Bastille template directory, with a Bastillefile, is built as
    /// one); a git repository (`https://host/repo.git#ref:subdir`,
    /// `git@host:repo.git#ref`, `file:///srv/repo.git`), checked out at
    /// the commit its ref resolves to; a tar archive at an `http(s)://`
    /// URL; or `-`, a tar archive on standard input. A URL or standard
    /// input that is no archive is the recipe itself, with an empty
    /// context.
    #[arg(value_name = "DIR|URL|-")]
    context: PathBuf,
    #[command(flatten)]
    template: TemplateArgs,
    /// How FROM, --cache-from, --cache-to and --push reach registries.
    #[command(flatten)]
    registry: RegistryArgs,
    #[command(flatten)]
    policy: PolicyArg,
}

/// A failed step of a Bastille template, named at its Bastillefile line
/// on the build error's own line; the build error's causes follow it.
#[derive(Debug)]
struct AtTemplateLine {
    at: String,
    source: engine::BuildError,
}

impl std::fmt::Display for AtTemplateLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.at, self.source)
    }
}

impl std::error::Error for AtTemplateLine {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

impl Blame for AtTemplateLine {
    fn is_user_error(&self) -> bool {
        self.source.is_user_error()
    }
}

/// `build --check`: the problems, and exit 1 when one is an error.
fn check(
    ctx: &Ctx,
    env: &BuildEnv<'_>,
    opts: &BuildOptions,
    text: Option<&str>,
) -> Result<(), Failure> {
    use engine::lint::Severity;
    let problems = engine::lint::check_recipe(env, opts, text);
    let errors = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    if ctx.json {
        JsonReporter::stdout().emit(json!({
            "event": "check",
            "problems": problems,
            "errors": errors,
            "warnings": problems.len() - errors,
        }));
    } else {
        for p in &problems {
            outln!("{}", p.line());
        }
    }
    match errors {
        0 => Ok(()),
        n => Err(Failure::user(anyhow!(
            "{}: {n} error{} found; no step was run",
            opts.jailfile.display(),
            if n == 1 { "" } else { "s" }
        ))),
    }
}

/// The build arguments: the files' (in order), then --build-arg's over them.
fn build_args(args: &BuildArgs) -> Result<BTreeMap<String, String>, Failure> {
    let mut out = BTreeMap::new();
    for f in &args.build_arg_files {
        out.extend(jailfile::arg_file::read(f)?);
    }
    out.extend(parse_build_args(&args.build_args)?);
    Ok(out)
}

/// `--cache-from` / `--cache-to`: repositories without a tag or digest.
fn registry_cache(
    args: &BuildArgs,
    registry: &RegistryOptions,
) -> Result<Option<engine::RegistryCache>, Failure> {
    if args.cache_from.is_empty() && args.cache_to.is_none() {
        return Ok(None);
    }
    let repo = |flag: &str, s: &String| {
        engine::cache::parse_repository(s).map_err(|e| Failure::user(anyhow!("{flag} {s}: {e}")))
    };
    Ok(Some(engine::RegistryCache {
        from: args
            .cache_from
            .iter()
            .map(|s| repo("--cache-from", s))
            .collect::<Result<_, _>>()?,
        to: args
            .cache_to
            .as_ref()
            .map(|s| repo("--cache-to", s))
            .transpose()?,
        options: registry.clone(),
    }))
}

/// The FreeBSD settings: flags over the configuration file.
fn freebsd_env(ctx: &Ctx, args: &BuildArgs) -> Result<FreeBsdEnv, Failure> {
    // Releases and catalogues are reached as registries are (--cert-dir,
    // --tls-verify, the configuration's timeouts).
    let http = std::sync::Arc::new(jbuild::transport::http::Http::new(
        args.registry.options(ctx)?,
    ));
    let mut release = ReleaseSource::new(&ctx.paths, &ctx.settings.freebsd).with_http(http.clone());
    if let Some(m) = &args.mirror {
        release.mirror = m.clone();
    }
    for set in &args.sets {
        let ok = !set.is_empty()
            && set
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok || set == "base" {
            return Err(Failure::user(anyhow!(
                "--sets {set}: name distribution sets besides base as the release's MANIFEST does, e.g. --sets lib32,src"
            )));
        }
    }
    release.extra_sets = args.sets.clone();
    if let Some(base) = &args.freebsd_base {
        release.base = base
            .parse()
            .map_err(|e: String| Failure::user(anyhow!(e)))?;
    }
    let pkg = &ctx.settings.pkg;
    let allowed = jbuild::jailparam::allowed(
        &ctx.settings.freebsd.allow_jail_params,
        &args.allow_jail_params,
    );
    Ok(FreeBsdEnv {
        release: Some(release),
        pkg_cache: Some(ctx.paths.pkg_cache()),
        pkg_repos_dir: args.pkg_repos.clone().or_else(|| pkg.repos_dir.clone()),
        pkg_offline: args.pkg_offline || pkg.offline,
        pkg_installer: jbuild::engine::freebsd::PkgInstaller::from_setting(
            pkg.installer.as_deref(),
        )
        .map_err(|e| Failure::user(anyhow!(e)))?,
        pkg_scripts: pkg.scripts,
        package_cache: Some(ctx.paths.package_cache()),
        allowed_jail_params: allowed,
        http,
        pkg_resolver: jbuild::pkg::mirror::Resolver::of_servers(&pkg.nameservers)
            .map_err(|e| Failure::user(anyhow!(e)))?,
        pkg_conf: jbuild::pkg::pkg_conf::Overrides {
            files_ignore_glob: pkg.files_ignore_glob.clone(),
            files_ignore_regex: pkg.files_ignore_regex.clone(),
        },
    })
}

/// The recipe `args` name: its path (`<stdin>` in DIR for `-f -`), its
/// translation when it is a Bastille template, and whether it is read
/// from standard input.
fn recipe(ctx: &Ctx, args: &BuildArgs) -> Result<(PathBuf, Option<Converted>, bool), Failure> {
    if !args.context.is_dir() {
        return Err(Failure::user(anyhow!(
            "build context `{}` is not a directory",
            args.context.display()
        )));
    }
    let stdin = args.file.as_deref() == Some(std::path::Path::new("-"));
    // `-f -`: named `<stdin>` in messages, in DIR so INCLUDEs are DIR's.
    let jailfile = match &args.file {
        _ if stdin => args.context.join("<stdin>"),
        Some(f) => f.clone(),
        None => jailfile::find_recipe(&args.context)
            .unwrap_or_else(|| args.context.join(jailfile::RECIPE_NAMES[0])),
    };
    let bastille = match &args.file {
        _ if stdin => false,
        Some(f) => f
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("Bastillefile")),
        None => !jailfile.exists() && jbuild::bastille::is_template(&args.context),
    };
    let translated = if bastille {
        if !args.build_args.is_empty() || !args.build_arg_files.is_empty() {
            return Err(Failure::user(anyhow!(
                "--build-arg and --build-arg-file are for Jailfiles; a Bastille template takes its ARGs with --arg NAME=VALUE or --arg-file FILE"
            )));
        }
        let from = args.file.clone().unwrap_or_else(|| args.context.clone());
        Some(translate(ctx, &from, &args.template, true)?)
    } else if args.template.any() {
        return Err(Failure::user(anyhow!(
            "--from, --arg, --arg-file and --templates are for Bastille templates, and `{}` is not one; for a Jailfile use --build-arg",
            args.context.display()
        )));
    } else {
        None
    };
    if translated.is_none() && !stdin && !jailfile.is_file() {
        return Err(Failure::user(match &args.file {
            Some(_) => anyhow!(
                "no Jailfile at `{}`; give one with -f FILE",
                jailfile.display()
            ),
            None => anyhow!(
                "no recipe in `{}`: looked for {}; give one with -f FILE",
                args.context.display(),
                jailfile::RECIPE_NAMES.join(", ")
            ),
        }));
    }
    Ok((jailfile, translated, stdin))
}

/// What the build makes and where it goes: the -t names, the platforms
/// (one, or several into the --manifest list), the --push destinations;
/// refused when they do not fit together or with --provenance, --sbom and
/// --sign-with.
struct Targets {
    tags: Vec<ImageName>,
    platforms: Vec<Platform>,
    platform: Option<Platform>,
    list: Option<ImageName>,
    destinations: Vec<Location>,
}

fn targets(args: &BuildArgs) -> Result<Targets, Failure> {
    let tags = args
        .tags
        .iter()
        .map(|t| {
            t.parse::<ImageName>()
                .map_err(|e| Failure::user(anyhow!("-t {t}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let platforms = args
        .platform
        .iter()
        .map(|p| Platform::parse(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::user(anyhow!("--platform: {e}")))?;
    let list = args
        .manifest
        .as_deref()
        .map(|m| {
            m.parse::<ImageName>()
                .map_err(|e| Failure::user(anyhow!("--manifest {m}: {e}")))
        })
        .transpose()?;
    if platforms.len() > 1 && list.is_none() {
        return Err(Failure::user(anyhow!(
            "--platform names {} platforms: give the manifest list to build them into with --manifest NAME",
            platforms.len()
        )));
    }
    let platform = platforms.first().cloned().filter(|_| platforms.len() == 1);
    if args.push && tags.is_empty() && list.is_none() {
        return Err(Failure::user(anyhow!(
            "--push pushes the image's -t names (or the --manifest list), and none was given: add -t REGISTRY/REPOSITORY:TAG"
        )));
    }
    // --push: the list, else every -t name; each name must be a registry
    // reference either way.
    let mut destinations = Vec::new();
    if args.push {
        for t in tags.iter().chain(&list) {
            let to = Location::Named(t.to_string())
                .registry_named()
                .map_err(Failure::from)?;
            destinations.push(to);
        }
        if list.is_some() {
            destinations = destinations.split_off(tags.len());
        }
    }
    if args.sign_with.is_some() && !args.provenance && !args.sbom {
        return Err(Failure::user(anyhow!(
            "--sign-with signs what --provenance and --sbom attest, and neither was given; to sign the image itself use `jbuild sign --key KEY IMAGE`"
        )));
    }
    let attesting = args.provenance || args.sbom;
    if attesting && tags.is_empty() {
        return Err(Failure::user(anyhow!(
            "--provenance and --sbom keep their attestations beside the image under its name, and none was given: add -t NAME[:TAG]"
        )));
    }
    if attesting {
        if let Some(list) = &list {
            return Err(Failure::user(anyhow!(
                "--provenance and --sbom are for one image, and --manifest {list} builds a list: build each platform on its own to attest it"
            )));
        }
    }
    Ok(Targets {
        tags,
        platforms,
        platform,
        list,
        destinations,
    })
}

pub fn run(ctx: &Ctx, mut args: BuildArgs) -> CmdResult {
    // Resolved once: FROM, ADD, a git context, the registry cache and the
    // pushes reach registries and servers the same way.
    let registry = args.registry.options(ctx)?;
    let secrets = engine::read_secrets(&args.secrets)?;
    let places = context::add_places(ctx, &registry, &secrets)?;
    let remote = context::remote(ctx, &mut args.context, &mut args.file, &places)?;
    let (jailfile, translated, stdin) = recipe(ctx, &args)?;
    let Targets {
        tags,
        platforms,
        platform,
        list,
        destinations,
    } = targets(&args)?;
    let pull: PullPolicy = match &args.pull {
        Some(p) => p
            .parse()
            .map_err(|e| Failure::user(anyhow!("--pull: {e}")))?,
        None => PullPolicy::Missing,
    };
    // Asked before the build, so a wrong password costs no build.
    let key = args.sign_with.as_deref().map(signing_key).transpose()?;
    let compression: Compression = args
        .compression
        .parse()
        .map_err(|e| Failure::user(anyhow!("--compression: {e}")))?;
    let epoch = jbuild::config::source_date_epoch().map_err(|e| Failure::user(anyhow!(e)))?;
    let (context, jailfile) = match &translated {
        Some(t) => (t.context.clone(), t.path.clone()),
        None => (args.context.clone(), jailfile),
    };
    // The caches a build writes: never through a symlink out of the root.
    ctx.check_places(&["cache", "cache/mounts", "cache/freebsd"])?;
    let opts = BuildOptions {
        context,
        jailfile,
        tags,
        build_args: build_args(&args)?,
        no_cache: args.no_cache,
        platform,
        compression,
        epoch,
        hash_cache: Some(ctx.paths.hash_cache()),
        target: args.target.clone(),
        labels: super::parse_pairs("--label", &args.labels)?,
        annotations: super::parse_pairs("--annotation", &args.annotations)?,
        jail_annotations: args.jail_annotations,
        mount_cache: Some(ctx.paths.mount_cache()),
        secrets,
        context_source: remote.as_ref().map(|r| r.source.clone()),
    };
    let piped = match remote.as_ref().and_then(|r| r.recipe.clone()) {
        Some(text) => Some(text),
        None if stdin => Some(jailfile::read_from(
            std::io::stdin().lock(),
            &opts.jailfile,
        )?),
        None => None,
    };
    if let (Some(list), Some(_)) = (&list, &args.provenance_file) {
        return Err(Failure::user(anyhow!(
            "--provenance-file is for one image, and --manifest {list} builds a list: build each platform on its own to get its provenance"
        )));
    }
    let cache = registry_cache(&args, &registry)?;
    let store = ctx.store()?;
    let snapshotter = ctx.snapshotter()?;
    let reporter = ctx.reporter();
    let puller = args.policy.guard(
        ctx,
        jbuild::transport::RegistryPuller {
            options: registry.clone(),
            jobs: 4,
        },
    );
    // FROM images unpack as `jbuild pull` would, by the same [layers] settings.
    let mut env = BuildEnv::new(&store, snapshotter.as_ref(), reporter.as_ref())
        .with_freebsd(freebsd_env(ctx, &args)?)
        .with_image_source(&puller)
        .with_layers(ctx.layer_policy(false, false))
        .with_pull(pull)
        .with_add_places(places);
    if let Some(cache) = cache {
        env = env.with_registry_cache(cache);
    }
    let text = match (&translated, piped) {
        (Some(t), _) => Some(t.jailfile.clone()),
        (None, piped) => piped,
    };
    if args.check {
        return check(ctx, &env, &opts, text.as_deref());
    }
    let request = BuildRequest {
        options: opts,
        text,
        platforms,
        list,
        attest: Attest {
            key: key.as_ref(),
            provenance: args.provenance,
            sbom: args.sbom,
        },
        iidfile: args.iidfile.clone(),
        provenance_file: args.provenance_file.clone(),
        destinations,
        push: PushOptions { jobs: 4, registry },
    };
    let summary = request::run(&env, &request).map_err(|e| failure(&translated, e))?;
    drop(env);
    drop(reporter);
    match summary {
        BuildSummary::List { output, pushed } => {
            let list = request.list.as_ref().expect("a list was built");
            listed(ctx, list, &output);
            for p in &pushed {
                if !ctx.json && !ctx.quiet {
                    eprintln!("pushed {} to {}", p.digest, p.place);
                }
            }
        }
        BuildSummary::Image {
            output,
            attested,
            pushed,
        } => built(ctx, &request, &output, &attested, &pushed),
    }
    Ok(())
}

/// A failed build: whose it is, and for a failed step of a Bastille
/// template, the Bastillefile line first.
fn failure(translated: &Option<Converted>, e: RequestError) -> Failure {
    let at = match (translated, &e) {
        (Some(t), RequestError::Build(engine::BuildError::Located(at)))
            if at.location.file.as_path() == t.path.as_path() =>
        {
            t.origin(at.location.line)
        }
        _ => None,
    };
    match (at, e) {
        (Some(at), RequestError::Build(source)) => AtTemplateLine { at, source }.into(),
        (_, e) => e.into(),
    }
}

/// What a build of one image prints: the pushes, the attestations, the
/// image.
fn built(
    ctx: &Ctx,
    request: &BuildRequest<'_>,
    out: &engine::BuildOutput,
    attested: &[jbuild::trust::Signed],
    pushed: &[Pushed],
) {
    if !ctx.json && !ctx.quiet {
        for p in pushed {
            eprintln!("pushed {} to {}", p.digest, p.place);
        }
    }
    let tags: Vec<String> = request.options.tags.iter().map(|t| t.to_string()).collect();
    if ctx.json {
        let pushed: Vec<_> = pushed
            .iter()
            .map(|p| json!({"name": p.place, "digest": p.digest}))
            .collect();
        JsonReporter::stdout().emit(json!({
            "event": "result",
            "manifest": out.manifest_digest.to_string(),
            "config": out.config_digest.to_string(),
            "tags": tags,
            "steps_run": out.steps_run,
            "steps_cached": out.steps_cached,
            "pushed": pushed,
            "steps_fetched": out.steps_fetched,
            "attested": attested,
        }));
        return;
    }
    if !ctx.quiet {
        if let Some(last) = attested.last() {
            eprintln!(
                "attested {} ({}{}): {} holds {} attestation(s)",
                last.image,
                last.digest,
                if request.attest.key.is_some() {
                    ""
                } else {
                    ", unsigned"
                },
                last.tag,
                last.layers
            );
        }
        eprintln!(
            "built {}{} ({})",
            out.manifest_digest,
            if tags.is_empty() {
                String::new()
            } else {
                format!(" as {}", tags.join(", "))
            },
            counts(out)
        );
    }
    outln!("{}", out.manifest_digest);
}

/// "N steps run, M cached[, K fetched from the registry cache]".
fn counts(out: &engine::BuildOutput) -> String {
    let mut s = format!("{} steps run, {} cached", out.steps_run, out.steps_cached);
    if out.steps_fetched > 0 {
        s.push_str(&format!(
            ", {} fetched from the registry cache",
            out.steps_fetched
        ));
    }
    s
}

/// What `build --manifest` prints: the list's digest, and each image.
fn listed(ctx: &Ctx, list: &ImageName, out: &engine::ListOutput) {
    let platform = |p: &engine::PlatformOutput| {
        p.platform
            .as_ref()
            .map_or_else(|| "(the recipe's)".to_string(), |p| p.to_string())
    };
    if ctx.json {
        let images: Vec<_> = out
            .images
            .iter()
            .map(|p| {
                json!({
                    "platform": platform(p),
                    "manifest": p.output.manifest_digest.to_string(),
                    "steps_run": p.output.steps_run,
                    "steps_cached": p.output.steps_cached,
                    "steps_fetched": p.output.steps_fetched,
                })
            })
            .collect();
        JsonReporter::stdout().emit(json!({
            "event": "result",
            "list": list.to_string(),
            "digest": out.list_digest.to_string(),
            "images": images,
        }));
        return;
    }
    if !ctx.quiet {
        for p in &out.images {
            eprintln!(
                "built {} for {} ({})",
                p.output.manifest_digest,
                platform(p),
                counts(&p.output)
            );
        }
        eprintln!("manifest list {list}: {}", out.list_digest);
    }
    outln!("{}", out.list_digest);
}
