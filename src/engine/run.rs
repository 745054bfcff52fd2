//! The build loop: plan, then for each step either reuse its snapshot
//! (cache hit: nothing runs) or prepare a snapshot from its parent, run the
//! step in it and commit it under the step's key; then export the target's
//! layers and write its config and manifest.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::bases::Bases;
use super::env::{BuildEnv, BuildOptions, BuildOutput};
use super::error::BuildError;
use super::freebsd;
use super::inputs::Inputs;
use super::mounts::{self, StepMounts};
use super::native::{self, CopyOptions, Ignore};
use crate::digest::Digest;
use crate::exec::{self, RunSpec};
use crate::image::{self, ImageMeta, Layer, Platform, SnapshotName};
use crate::jailfile::{self, CopyFrom, MountKind, Op, RunMount};
use crate::plan::{self, ExecContext, Plan, PlanOptions, PlannedBase, PlannedStage, StepKind};
use crate::report::{Level, StepInfo, StepResult};
use crate::snapshot::{label, Labels, SnapshotError};

/// The result of one stage: its top snapshot and its layers.
#[derive(Debug, Clone)]
pub(super) struct StageResult {
    pub(super) layers: Vec<Layer>,
}

impl StageResult {
    fn top(&self) -> Option<&str> {
        self.layers.last().map(|l| l.snapshot.as_str())
    }
}

pub fn build(env: &BuildEnv<'_>, opts: &BuildOptions) -> Result<BuildOutput, BuildError> {
    let jailfile_text = jailfile::read(&opts.jailfile)?;
    build_text(env, opts, &jailfile_text)
}

/// Like [`build`], with the Jailfile's text given (e.g. translated from a
/// Bastille template); `opts.jailfile` names it in messages and history.
pub fn build_text(
    env: &BuildEnv<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
) -> Result<BuildOutput, BuildError> {
    let bases = Bases::new(env)?;
    build_text_with(&bases, opts, jailfile_text)
}

/// [`build_text`] with the images fetched into `bases` (shared by the
/// passes of a multi-platform build, so each image is fetched once per
/// platform).
pub(super) fn build_text_with(
    bases: &Bases<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
) -> Result<BuildOutput, BuildError> {
    Ok(build_or_check(bases, opts, jailfile_text, false)?.expect("a build, not a check"))
}

/// Plans the build and makes every check that comes before a step runs
/// (jail parameters, steps for a foreign architecture), running nothing;
/// `build_platforms` asks this of every platform before it builds one.
pub(super) fn check_text(
    bases: &Bases<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
) -> Result<(), BuildError> {
    build_or_check(bases, opts, jailfile_text, true).map(drop)
}

/// The FROM images of the stages the target needs, found by reading the
/// recipe once without any image's ONBUILD triggers: only these are
/// fetched to look for triggers, so a stage the build skips costs no pull
/// (BuildKit does not touch such a stage either). `None` (every image)
/// when that reading fails: the reading with triggers reports the error.
/// A stage that only a trigger's `COPY --from` makes needed has its image
/// read without triggers.
fn needed_images(opts: &BuildOptions, jailfile_text: &str) -> Option<BTreeSet<String>> {
    struct None_;
    impl jailfile::Triggers for None_ {
        fn onbuild(&self, _: &str, _: Option<&str>) -> Vec<String> {
            Vec::new()
        }
    }
    let bare = jailfile::load_for_build(
        &opts.jailfile,
        jailfile_text,
        &opts.build_args,
        &jailfile::BuildInputs {
            context: &opts.context,
            triggers: &None_,
            platform_args: super::platform_args::predefined(opts.platform.as_ref()),
        },
    )
    .ok()?;
    let last = bare.stages.len().checked_sub(1)?;
    let target = match &opts.target {
        Some(t) => plan::target_stage(&bare, t).ok()?,
        None => last,
    };
    Some(
        plan::needed_stages(&bare, target)
            .into_iter()
            .filter_map(|i| match &bare.stages[i].base {
                jailfile::Base::Image(reference) => Some(reference.clone()),
                _ => None,
            })
            .collect(),
    )
}

fn build_or_check(
    bases: &Bases<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
    check_only: bool,
) -> Result<Option<BuildOutput>, BuildError> {
    let env = bases.env();
    let jailfile_text = jailfile_text.to_string();
    let ignore = Ignore::load_for(&opts.context, &opts.jailfile).map_err(BuildError::Context)?;
    // The fetch phase: the images the recipe reads (its FROM images' ONBUILD
    // triggers as the recipe is read, then every FROM and COPY --from
    // image), found or pulled before the build is planned.
    let triggers = super::inputs::Triggers {
        bases,
        platform: opts.platform.as_ref(),
        only: needed_images(opts, &jailfile_text),
    };
    let parsed = jailfile::load_for_build(
        &opts.jailfile,
        &jailfile_text,
        &opts.build_args,
        &jailfile::BuildInputs {
            context: &opts.context,
            triggers: &triggers,
            platform_args: super::platform_args::predefined(opts.platform.as_ref()),
        },
    )?;
    for name in &parsed.unused_build_args {
        env.reporter.message(
            Level::Warn,
            &format!("build argument `{name}` was given but no ARG uses it"),
        );
    }
    for warning in &parsed.warnings {
        env.reporter.message(Level::Warn, warning);
    }
    if let Some(ignore) = &ignore {
        let file = ignore.file().unwrap_or_default();
        let said = if ignore.is_recipe_own() {
            format!("using {file}, the recipe's own ignore file")
        } else {
            format!("using the build context's {file}")
        };
        env.reporter.message(Level::Info, &said);
    }
    let nonce = opts
        .no_cache
        .then(|| format!("{}-{:?}", std::process::id(), std::time::SystemTime::now()));
    if let Some(cache) = &opts.hash_cache {
        native::hash_cache::attach(cache);
    }
    let target = match &opts.target {
        Some(t) => Some(plan::target_stage(&parsed, t)?),
        None => None,
    };
    let plan_opts = PlanOptions {
        platform: opts.platform.clone(),
        no_cache_nonce: nonce,
        target,
    };
    bases.fetch_all(&plan::bases::images_read(&parsed, &plan_opts));
    // The planner reads what was fetched, and nothing else.
    let inputs = Inputs {
        freebsd: &env.freebsd,
        fetched: bases.fetched(),
        context: &opts.context,
        ignore: ignore.as_ref(),
        releases: Default::default(),
        pkgbases: Default::default(),
        pkg_repos: Default::default(),
        git: Default::default(),
        downloads: Default::default(),
        add: env.add.as_ref(),
        context_revision: opts
            .context_source
            .as_ref()
            .and_then(|s| s.revision.as_deref()),
        max_download: env.layer_policy.limits.max_size,
        reporter: env.reporter,
    };
    let plan = plan::plan(&parsed, &inputs, &plan_opts)?;
    freebsd::check_jail_params(&plan, &env.freebsd.allowed_jail_params)?;
    super::foreign::check_runnable(&plan, &super::foreign::Host::this())?;
    mounts::check_required_secrets(&plan, &opts.secrets)?;
    if check_only {
        return Ok(None);
    }

    if let Some(cache) = &opts.hash_cache {
        if let Err(e) = native::hash_cache::save(cache) {
            // Only a shortcut is lost: the next build hashes the files again.
            tracing::debug!("saving {}: {e}", cache.display());
        }
    }
    let mut run = Run {
        env,
        opts,
        plan: &plan,
        inputs: &inputs,
        ignore: ignore.as_ref(),
        results: HashMap::new(),
        steps_run: 0,
        steps_cached: 0,
        masks: mounts::masks(&opts.secrets),
        steps_fetched: 0,
        lookups: super::cache::Lookups::start(
            env.registry_cache.as_ref(),
            env.store,
            env.snapshotter,
            &plan,
            opts.no_cache,
        )?,
    };
    for stage in &plan.stages {
        let result = run.stage(stage)?;
        run.results.insert(stage.index, result);
    }
    let target = plan.target();
    let mut result = run
        .results
        .remove(&target.index)
        .expect("target stage was built");
    // The blobs exported here are named only by the tag below: the
    // build's pin (`bases.pin`, held since before FROM was looked up)
    // keeps `prune` and `check --repair` off them until then.
    let layers = image::export_layers(
        env.store,
        env.snapshotter,
        env.reporter,
        &mut result.layers,
        opts.compression,
        opts.epoch,
    )?;
    let base = match &target.base {
        PlannedBase::Image {
            reference,
            manifest,
        } => Some((reference.as_str(), manifest)),
        _ => None,
    };
    let meta = ImageMeta {
        epoch: opts.epoch,
        jailfile_text: &jailfile_text,
        base,
        annotations: &opts.annotations,
        jail_annotations: opts.jail_annotations,
    };
    let mut state = target.state.clone();
    state.labels.extend(opts.labels.clone());
    let (manifest, config_digest) = image::write::write(env.store, &state, &layers, &meta)?;
    for tag in &opts.tags {
        env.store.tag(tag, &manifest)?;
    }
    if !opts.no_cache {
        run.results.insert(target.index, result);
        let stages = run.results.iter().map(|(i, r)| (*i, r.layers.clone()));
        super::cache::push(
            env.registry_cache.as_ref(),
            &env.unpacker(),
            run.export_as(),
            &plan,
            stages.collect(),
            run.lookups.as_ref(),
        );
    }
    let manifest_digest =
        crate::store::descriptor_digest(&manifest).map_err(|source| image::ImageError::Digest {
            image: "the new image".into(),
            source,
        })?;
    let images = bases.fetched().by_reference();
    let facts = super::facts::BuildFacts::of(&plan, &jailfile_text, images);
    Ok(Some(BuildOutput {
        facts,
        manifest,
        manifest_digest,
        config_digest,
        steps_run: run.steps_run,
        steps_cached: run.steps_cached,
        steps_fetched: run.steps_fetched,
    }))
}

struct Run<'a, 'b> {
    env: &'a BuildEnv<'b>,
    opts: &'a BuildOptions,
    plan: &'a Plan,
    inputs: &'a Inputs<'a>,
    ignore: Option<&'a Ignore>,
    results: HashMap<usize, StageResult>,
    steps_run: usize,
    steps_cached: usize,
    /// The secrets' forms, masked in every step output line.
    masks: Vec<String>,
    steps_fetched: usize,
    /// `--cache-from` answers, looked up while the steps run.
    lookups: Option<super::cache::Lookups>,
}

impl Run<'_, '_> {
    fn export_as(&self) -> super::cache::ExportAs {
        super::cache::ExportAs {
            compression: self.opts.compression,
            epoch: self.opts.epoch,
        }
    }

    fn info(&self, stage: &PlannedStage, number: usize, text: &str) -> StepInfo {
        StepInfo {
            index: number,
            total: self.plan.total_steps,
            stage: stage.label(),
            text: text.to_string(),
        }
    }

    fn stage(&mut self, stage: &PlannedStage) -> Result<StageResult, BuildError> {
        let from = self.info(stage, stage.from_number, &stage.from_text);
        let started = Instant::now();
        self.env.reporter.step_start(&from);
        let mut layers = match &stage.base {
            PlannedBase::Scratch => Vec::new(),
            PlannedBase::Stage(i) => self
                .results
                .get(i)
                .expect("base stage built first")
                .layers
                .clone(),
            PlannedBase::Image { reference, .. } => {
                let img = self
                    .inputs
                    .image_of(reference, &stage.base_state.platform)
                    .map_err(|e| e.located(&stage.location))?;
                self.env
                    .unpacker()
                    .unpack(&img)
                    .map_err(|e| BuildError::from(e).located(&stage.location))?
            }
            PlannedBase::FreeBsdRelease { release, key } => {
                let name = SnapshotName::step(key);
                self.release_base(stage, release, key, &name, &from)
                    .map_err(|e| e.located(&stage.location))?;
                vec![Layer {
                    snapshot: name,
                    blob: None,
                }]
            }
        };
        self.env
            .reporter
            .step_done(&from, StepResult::Metadata, started.elapsed());

        for ps in &stage.steps {
            let info = self.info(stage, ps.number, &ps.step.text);
            let started = Instant::now();
            self.env.reporter.step_start(&info);
            let StepKind::Layer { key, exec, .. } = &ps.kind else {
                self.env
                    .reporter
                    .step_done(&info, StepResult::Metadata, started.elapsed());
                continue;
            };
            let name = SnapshotName::step(key);
            let parent = layers.last().map(|l| l.snapshot.clone());
            let reused = self
                .reuse(key, parent.as_deref(), &name, &info)
                .map_err(|e| e.located(&ps.step.location).with_step(&ps.step.text))?;
            if let Some(result) = reused {
                match result {
                    StepResult::Fetched => self.steps_fetched += 1,
                    _ => self.steps_cached += 1,
                }
                self.env
                    .reporter
                    .step_done(&info, result, started.elapsed());
                layers.push(Layer {
                    snapshot: name,
                    blob: None,
                });
                continue;
            }
            let active = SnapshotName::active();
            let root = self.env.snapshotter.prepare(&active, parent.as_deref())?;
            let outcome = self.execute(&ps.step.op, &ps.step.args, exec, &root, &info);
            let outcome = outcome.and_then(|()| {
                let labels: Labels = [(label::KEY.to_string(), key.to_string())].into();
                match self.env.snapshotter.commit(&name, &active, &labels) {
                    Err(SnapshotError::AlreadyExists(_)) => {
                        // Another build committed the same step first: same key, same result.
                        self.env
                            .snapshotter
                            .remove(&active)
                            .map_err(BuildError::from)
                    }
                    other => other.map_err(BuildError::from),
                }
            });
            if let Err(e) = outcome {
                if let Err(cleanup) = self.env.snapshotter.remove(&active) {
                    tracing::debug!("removing {active} after a failed step: {cleanup}");
                }
                self.env
                    .reporter
                    .step_done(&info, StepResult::Failed, started.elapsed());
                return Err(e.located(&ps.step.location).with_step(&ps.step.text));
            }
            self.steps_run += 1;
            self.env
                .reporter
                .step_done(&info, StepResult::Done, started.elapsed());
            layers.push(Layer {
                snapshot: name,
                blob: None,
            });
        }
        Ok(StageResult { layers })
    }

    /// The step `key`'s result without running it: its snapshot here
    /// (`Cached`), or restored from a registry cache (`Fetched`).
    fn reuse(
        &self,
        key: &Digest,
        parent: Option<&str>,
        name: &str,
        info: &StepInfo,
    ) -> Result<Option<StepResult>, BuildError> {
        let local = self.env.snapshotter.stat(name)?;
        if local.is_some_and(|i| i.kind == crate::snapshot::Kind::Committed) {
            return Ok(Some(StepResult::Cached));
        }
        let Some(lookups) = &self.lookups else {
            return Ok(None);
        };
        let restored = lookups.restore(
            &self.env.unpacker(),
            self.export_as(),
            key,
            parent,
            name,
            info,
        )?;
        Ok(restored.then_some(StepResult::Fetched))
    }

    /// The base layer of `FROM freebsd:<release>`: reused when its
    /// snapshot exists; else the sets are fetched and verified (nothing
    /// is prepared before they are), extracted, and the snapshot committed
    /// — or, for a pkgbase base, pkg(8) installs it into the prepared root
    /// (its output shown as the FROM step's).
    fn release_base(
        &self,
        stage: &PlannedStage,
        release: &str,
        key: &Digest,
        name: &str,
        info: &StepInfo,
    ) -> Result<(), BuildError> {
        if self
            .env
            .snapshotter
            .stat(name)?
            .is_some_and(|i| i.kind == crate::snapshot::Kind::Committed)
        {
            return Ok(());
        }
        let platform = &stage.base_state.platform;
        let id = format!("{release}|{platform}");
        let pkgbase = self.inputs.pkgbases.borrow().get(&id).cloned();
        let rel = match &pkgbase {
            Some(base) => {
                self.env.reporter.message(
                    Level::Info,
                    &format!(
                        "installing FreeBSD {release} ({}) from {} with {}",
                        base.packages.join(", "),
                        base.url,
                        base.program.display()
                    ),
                );
                None
            }
            None => {
                let rel = self
                    .inputs
                    .releases
                    .borrow()
                    .get(&id)
                    .cloned()
                    .expect("the planner resolved the release");
                self.fetch_release(release, &rel)?;
                Some(rel)
            }
        };
        let active = SnapshotName::active();
        let root = self.env.snapshotter.prepare(&active, None)?;
        let filled = match (&rel, &pkgbase) {
            // Downloads what the cache lacks as it extracts.
            (Some(rel), _) => rel.fetch_into(&root, self.env.reporter).map(drop),
            (None, Some(base)) => {
                let reporter = self.env.reporter;
                base.install(&root, &crate::release::pkgbase::HostPkg, &mut |s, l| {
                    reporter.step_output(info, s, l)
                })
            }
            (None, None) => unreachable!("one of the two"),
        };
        let made = filled.map_err(BuildError::from).and_then(|()| {
            let labels: Labels = [(label::KEY.to_string(), key.to_string())].into();
            match self.env.snapshotter.commit(name, &active, &labels) {
                Err(SnapshotError::AlreadyExists(_)) => self
                    .env
                    .snapshotter
                    .remove(&active)
                    .map_err(BuildError::from),
                other => other.map_err(BuildError::from),
            }
        });
        if made.is_err() {
            if let Err(cleanup) = self.env.snapshotter.remove(&active) {
                tracing::debug!("removing {active} after a failed base: {cleanup}");
            }
        }
        made
    }

    /// Says which sets of `rel` the cache lacks (and `fetch_into` will
    /// download).
    fn fetch_release(
        &self,
        release: &str,
        rel: &crate::release::Release,
    ) -> Result<(), BuildError> {
        let missing: Vec<&str> = rel
            .sets
            .iter()
            .filter(|s| !s.path.is_file())
            .map(|s| s.name.as_str())
            .collect();
        if !missing.is_empty() {
            self.env.reporter.message(
                Level::Info,
                &format!(
                    "downloading FreeBSD {release} ({}) from {}",
                    missing.join(", "),
                    rel.sets[0].url.rsplit_once('/').map_or("", |(d, _)| d)
                ),
            );
        }
        Ok(())
    }

    fn execute(
        &self,
        op: &Op,
        args: &BTreeMap<String, String>,
        ctx: &ExecContext,
        root: &Path,
        info: &StepInfo,
    ) -> Result<(), BuildError> {
        match op {
            Op::Run {
                command,
                network,
                mounts,
            } => {
                let mounts = self.step_mounts(mounts, &ctx.platform)?;
                let argv = plan::state::argv_in(command, ctx.shell.as_deref());
                self.run_process(argv, args, ctx, *network, mounts.mounts, root, info)
            }
            Op::Pkg { packages } => {
                let mut argv = vec!["pkg".to_string(), "install".to_string(), "-y".to_string()];
                argv.extend(packages.iter().cloned());
                let mut ctx = ctx.clone();
                // A fresh release has only pkg's bootstrap stub, which asks
                // before installing pkg itself.
                if !ctx.env.iter().any(|(k, _)| k == "ASSUME_ALWAYS_YES") {
                    ctx.env.push(("ASSUME_ALWAYS_YES".into(), "yes".into()));
                }
                let mounts = self.env.freebsd.pkg_mounts()?;
                self.run_process(argv, args, &ctx, true, mounts.mounts, root, info)
            }
            Op::Copy {
                from,
                sources,
                dest,
                chown,
                chmod,
                parents,
                exclude,
            } => {
                let owner = match chown {
                    Some(spec) => Some(exec::user::resolve_owner(root, spec)?),
                    None => None,
                };
                let copy_opts = CopyOptions {
                    chown: owner,
                    chmod: *chmod,
                    parents: *parents,
                    exclude: exclude.clone(),
                    ..CopyOptions::default()
                };
                let (src_root, ignore) =
                    self.source_root(from.as_ref(), "COPY --from", &ctx.platform)?;
                native::copy(
                    &src_root,
                    sources,
                    dest,
                    root,
                    &ctx.workdir,
                    ignore,
                    &copy_opts,
                )
                .map(drop)
                .map_err(BuildError::Native)
            }
            Op::Add {
                sources,
                dest,
                chown,
                chmod,
                exclude,
                checksum,
                keep_git_dir,
            } => {
                let owner = match chown {
                    Some(spec) => Some(exec::user::resolve_owner(root, spec)?),
                    None => None,
                };
                let scratch = match &self.env.add {
                    Some(places) => places.scratch()?,
                    None => std::env::temp_dir(),
                };
                let copy_opts = CopyOptions {
                    chown: owner,
                    chmod: *chmod,
                    exclude: exclude.clone(),
                    unpack: Some(native::Unpack {
                        scratch,
                        limits: self.env.layer_policy.limits,
                    }),
                    ..CopyOptions::default()
                };
                let local: Vec<_> = sources
                    .iter()
                    .filter_map(|s| match s {
                        jailfile::AddSource::Context(c) => Some(c.clone()),
                        _ => None,
                    })
                    .collect();
                if !local.is_empty() {
                    native::copy(
                        &self.opts.context,
                        &local,
                        dest,
                        root,
                        &ctx.workdir,
                        self.ignore,
                        &copy_opts,
                    )
                    .map_err(BuildError::Native)?;
                }
                for s in sources {
                    match s {
                        jailfile::AddSource::Git { url, reference } => {
                            let mut git = self.inputs.git.borrow_mut();
                            let places = self.env.add.as_ref();
                            let commit = git.commit(places, url, reference.as_deref())?;
                            let tree = git.checkout(places, url, &commit, *keep_git_dir)?;
                            let opts = CopyOptions {
                                unpack: None,
                                ..copy_opts.clone()
                            };
                            super::add::copy_tree(tree.path(), dest, root, &ctx.workdir, &opts)?;
                        }
                        jailfile::AddSource::Url(url) => {
                            let places = self
                                .env
                                .add
                                .as_ref()
                                .ok_or_else(|| super::add::AddError::NoPlaces(url.clone()))?;
                            let max = self.env.layer_policy.limits.max_size;
                            let (_, cached) = places.download(url, checksum.as_ref(), max)?;
                            let name = jailfile::url_file_name(url).unwrap_or("download");
                            let opts = CopyOptions {
                                unpack: None,
                                ..copy_opts.clone()
                            };
                            let scratch = places.scratch()?;
                            super::add::copy_download(
                                &cached,
                                name,
                                &scratch,
                                dest,
                                root,
                                &ctx.workdir,
                                &opts,
                            )?;
                        }
                        jailfile::AddSource::Context(_) => {}
                    }
                }
                Ok(())
            }
            Op::Sysrc {
                file,
                name,
                op,
                value,
            } => native::sysrc(root, file, name, *op, value)
                .map(drop)
                .map_err(BuildError::Native),
            Op::Service { name, enable } => native::service(root, name, *enable)
                .map(drop)
                .map_err(BuildError::Native),
            Op::LineInFile { line, file } => native::line_in_file(root, line, file)
                .map(drop)
                .map_err(BuildError::Native),
            Op::Render { path, vars } => native::render(root, path, vars)
                .map(drop)
                .map_err(BuildError::Native),
            // Metadata instructions have no StepKind::Layer and never get here.
            _ => Ok(()),
        }
    }

    /// The root a COPY or a bind mount reads from: the build context
    /// (with its `.jailignore`), an earlier stage's top snapshot, or an
    /// image's top layer, unpacked if needed. `what` names the instruction.
    fn source_root(
        &self,
        from: Option<&CopyFrom>,
        what: &str,
        platform: &Platform,
    ) -> Result<(PathBuf, Option<&Ignore>), BuildError> {
        Ok(match from {
            None => (self.opts.context.clone(), self.ignore),
            Some(CopyFrom::Stage(i)) => {
                let top = self
                    .results
                    .get(i)
                    .and_then(|r| r.top().map(str::to_string));
                match top {
                    Some(name) => (self.env.snapshotter.view(&name)?, None),
                    None => {
                        return Err(BuildError::Step(format!(
                            "{what} stage {i}: that stage made no files (it has no layer), so there is nothing to read"
                        )))
                    }
                }
            }
            Some(CopyFrom::Image(r)) => {
                let img = self.inputs.image_of(r, platform)?;
                let layers = self.env.unpacker().unpack(&img)?;
                match layers.last() {
                    Some(l) => (self.env.snapshotter.view(&l.snapshot)?, None),
                    None => {
                        return Err(BuildError::Step(format!(
                            "image `{r}` has no layers to read from"
                        )))
                    }
                }
            }
        })
    }

    /// What a RUN's `--mount`s become for the executor (see [`mounts`]).
    fn step_mounts(
        &self,
        wanted: &[RunMount],
        platform: &Platform,
    ) -> Result<StepMounts, BuildError> {
        let mut out = StepMounts::default();
        for m in wanted {
            match &m.kind {
                MountKind::Secret { id, .. } => out.add_secret(m, self.opts.secrets.get(id)),
                MountKind::Tmpfs { size } => out.add_tmpfs(&m.target, *size),
                MountKind::Cache {
                    id,
                    sharing,
                    mode,
                    uid,
                    gid,
                } => {
                    let Some(base) = &self.opts.mount_cache else {
                        return Err(BuildError::Step(
                            "this build has no directory for cache mounts".into(),
                        ));
                    };
                    out.add_cache(base, &m.target, id, *sharing, *mode, *uid, *gid)?;
                }
                MountKind::Bind { from, source, rw } => {
                    let (root, _) =
                        self.source_root(from.as_ref(), "RUN --mount=type=bind,from=", platform)?;
                    let host = crate::fsutil::resolve_in_root(&root, Path::new(source), true)
                        .map_err(|e| BuildError::io(format!("bind mount source `{source}`"), e))?;
                    if !host.exists() {
                        return Err(BuildError::Step(format!(
                            "bind mount source `{source}` does not exist"
                        )));
                    }
                    out.add_bind(&host, &m.target, *rw)?;
                }
            }
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn run_process(
        &self,
        argv: Vec<String>,
        args: &BTreeMap<String, String>,
        ctx: &ExecContext,
        network: bool,
        mounts: Vec<exec::Mount>,
        root: &Path,
        info: &StepInfo,
    ) -> Result<(), BuildError> {
        // ARGs are the step's environment too; ENV wins over an ARG of the same name.
        let mut env: Vec<(String, String)> = args
            .iter()
            .filter(|(k, _)| !ctx.env.iter().any(|(e, _)| e == *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.extend(ctx.env.iter().cloned());
        let spec = RunSpec {
            argv,
            env,
            cwd: ctx.workdir.clone(),
            user: ctx.user.clone(),
            network,
            hostname: "jbuild".into(),
            jail_params: freebsd::build_jail_params(&ctx.jail),
            mounts,
        };
        let executor = self.env.executor()?;
        let reporter = self.env.reporter;
        let masks = &self.masks;
        let mut sink = |stream, line: &[u8]| {
            if masks.is_empty() {
                return reporter.step_output(info, stream, line);
            }
            let text = String::from_utf8_lossy(line);
            let masked = crate::keychain::redact::replace_all(&text, masks);
            reporter.step_output(info, stream, masked.as_bytes())
        };
        let outcome = executor.run(root, &spec, &mut sink)?;
        if outcome.success() {
            Ok(())
        } else {
            Err(BuildError::StepFailed(outcome))
        }
    }
}
