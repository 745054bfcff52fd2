//! The build loop: plan, then for each step either reuse its snapshot
//! (cache hit: nothing runs) or prepare a snapshot from its parent, run the
//! step in it and commit it under the step's key; then export the target's
//! layers and write its config and manifest.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use super::env::{BuildEnv, BuildOptions, BuildOutput};
use super::error::BuildError;
use super::fetch::FetchPhase;
use super::freebsd;
use super::mounts;
use super::native::{self, Ignore};
use crate::blame::Blame;
use crate::digest::Digest;
use crate::image::{self, ImageMeta, Layer, SnapshotName};
use crate::jailfile;
use crate::pkg::firstboot;
use crate::plan::{self, Plan, PlanOptions, PlannedBase, PlannedStage, StepKind};
use crate::release::pkgbase::{HostPkg, Installer};
use crate::report::{Level, StepInfo, StepResult};
use crate::snapshot::fflags::SnapshotFlags;
use crate::snapshot::{label, Labels, SnapshotError};

/// The result of one stage: its top snapshot and its layers.
#[derive(Debug, Clone)]
pub(super) struct StageResult {
    pub(super) layers: Vec<Layer>,
}

impl StageResult {
    pub(super) fn top(&self) -> Option<&str> {
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
    let fetch = FetchPhase::new(env)?;
    build_text_with(&fetch, opts, jailfile_text)
}

/// [`build_text`] with what it needs fetched by `fetch` (shared by the
/// passes of a multi-platform build, so each thing is fetched once per
/// platform, or once).
pub(super) fn build_text_with(
    fetch: &FetchPhase<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
) -> Result<BuildOutput, BuildError> {
    Ok(build_or_check(fetch, opts, jailfile_text, false)?.expect("a build, not a check"))
}

/// Plans the build and makes every check that comes before a step runs
/// (jail parameters, steps for a foreign architecture), running nothing;
/// `build_platforms` asks this of every platform before it builds one.
pub(super) fn check_text(
    fetch: &FetchPhase<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
) -> Result<(), BuildError> {
    build_or_check(fetch, opts, jailfile_text, true).map(drop)
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

/// The recipe read for a build: its FROM images' ONBUILD triggers fetched
/// as it is read, its warnings reported, and the ignore file in force.
fn read_recipe(
    fetch: &FetchPhase<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
) -> Result<(jailfile::Build, Option<Ignore>), BuildError> {
    let env = fetch.env();
    let ignore = Ignore::load_for(&opts.context, &opts.jailfile).map_err(BuildError::Context)?;
    // The fetch phase: the images the recipe reads (its FROM images' ONBUILD
    // triggers as the recipe is read, then every FROM and COPY --from
    // image), found or pulled before the build is planned.
    let triggers = super::inputs::Triggers {
        bases: &fetch.bases,
        platform: opts.platform.as_ref(),
        only: needed_images(opts, jailfile_text),
    };
    let parsed = jailfile::load_for_build(
        &opts.jailfile,
        jailfile_text,
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
    Ok((parsed, ignore))
}

fn build_or_check(
    fetch: &FetchPhase<'_>,
    opts: &BuildOptions,
    jailfile_text: &str,
    check_only: bool,
) -> Result<Option<BuildOutput>, BuildError> {
    let env = fetch.env();
    let jailfile_text = jailfile_text.to_string();
    let (parsed, ignore) = read_recipe(fetch, opts, &jailfile_text)?;
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
        pkg_scripts: env.freebsd.pkg_scripts,
    };
    // The planner reads what was fetched, and nothing else.
    let revision = opts
        .context_source
        .as_ref()
        .and_then(|s| s.revision.as_deref());
    let inputs = fetch.fetch(
        &parsed,
        &plan_opts,
        &opts.context,
        ignore.as_ref(),
        revision,
    );
    let plan = plan::plan(&parsed, &inputs, &plan_opts)?;
    drop(inputs);
    freebsd::check_jail_params(&plan, &env.freebsd.allowed_jail_params)?;
    let host = super::foreign::Host {
        pkg_in_jail: env.freebsd.pkg_installer == freebsd::PkgInstaller::Pkg,
        ..super::foreign::Host::this()
    };
    super::foreign::check_runnable(&plan, &host)?;
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
    let lookups = super::cache::Lookups::start(
        env.registry_cache.as_ref(),
        env.store,
        env.snapshotter,
        &plan,
        opts.no_cache,
    )?;
    let mut run = Run {
        env,
        opts,
        plan,
        recipe: &parsed,
        plan_opts: &plan_opts,
        inputs: fetch,
        ignore: ignore.as_ref(),
        results: HashMap::new(),
        steps_run: 0,
        steps_cached: 0,
        masks: mounts::masks(&opts.secrets),
        steps_fetched: 0,
        lookups,
    };
    // By position: a PKG step reached plans the build again
    // (`Run::finish_key`), and the stages after it are the new plan's.
    for i in 0..run.plan.stages.len() {
        let result = run.stage(i)?;
        run.results.insert(run.plan.stages[i].index, result);
    }
    run.finish(&jailfile_text, fetch).map(Some)
}

/// One build's running state; its step methods are in [`super::step`].
pub(super) struct Run<'a, 'b> {
    pub(super) env: &'a BuildEnv<'b>,
    pub(super) opts: &'a BuildOptions,
    /// The plan, made again each time a PKG step's key is finished (see
    /// [`crate::plan`], "Keys finished when the step is reached").
    plan: Plan,
    /// What the plan is made from, to make it again.
    recipe: &'a jailfile::Build,
    plan_opts: &'a PlanOptions,
    pub(super) inputs: &'a FetchPhase<'a>,
    pub(super) ignore: Option<&'a Ignore>,
    pub(super) results: HashMap<usize, StageResult>,
    steps_run: usize,
    steps_cached: usize,
    /// The secrets' forms, masked in every step output line.
    pub(super) masks: Vec<String>,
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

    /// After the last stage: the target's layers exported, its config and
    /// manifest written and tagged, the stages pushed to a registry cache.
    fn finish(
        mut self,
        jailfile_text: &str,
        fetch: &FetchPhase<'_>,
    ) -> Result<BuildOutput, BuildError> {
        let env = self.env;
        let opts = self.opts;
        let plan = &self.plan;
        let target = plan.target();
        let mut result = self
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
            jailfile_text,
            base,
            annotations: &opts.annotations,
            jail_annotations: opts.jail_annotations,
        };
        let mut state = target.state.clone();
        state.labels.extend(opts.labels.clone());
        first_start_label(env, result.top(), &mut state.labels);
        let (manifest, config_digest) = image::write::write(env.store, &state, &layers, &meta)?;
        for tag in &opts.tags {
            env.store.tag(tag, &manifest)?;
        }
        if !opts.no_cache {
            self.results.insert(target.index, result);
            let stages = self.results.iter().map(|(i, r)| (*i, r.layers.clone()));
            super::cache::push(
                env.registry_cache.as_ref(),
                &env.unpacker(),
                self.export_as(),
                plan,
                stages.collect(),
                self.lookups.as_ref(),
            );
        }
        let manifest_digest = crate::store::descriptor_digest(&manifest).map_err(|source| {
            image::ImageError::Digest {
                image: "the new image".into(),
                source,
            }
        })?;
        let images = fetch.bases.fetched().by_reference();
        let facts = super::facts::BuildFacts::of(plan, jailfile_text, images);
        Ok(BuildOutput {
            facts,
            manifest,
            manifest_digest,
            config_digest,
            steps_run: self.steps_run,
            steps_cached: self.steps_cached,
            steps_fetched: self.steps_fetched,
        })
    }

    fn info(&self, stage: &PlannedStage, number: usize, text: &str) -> StepInfo {
        StepInfo {
            index: number,
            total: self.plan.total_steps,
            stage: stage.label(),
            text: text.to_string(),
        }
    }

    /// Builds the plan's stage at position `at`.
    fn stage(&mut self, at: usize) -> Result<StageResult, BuildError> {
        // The steps are read from `self.plan` as they are reached: one
        // may finish a key and make the plan again.
        let stage = &self.plan.stages[at].head();
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

        for n in 0..self.plan.stages[at].steps.len() {
            let ps = &self.plan.stages[at].steps[n];
            let info = self.info(stage, ps.number, &ps.step.text);
            let started = Instant::now();
            self.env.reporter.step_start(&info);
            let parent = layers.last().map(|l| l.snapshot.clone());
            if let StepKind::Layer {
                pending: Some(plan::Pending::Awaits(root)),
                ..
            } = &ps.kind
            {
                let (root, location) = (root.clone(), ps.step.location.clone());
                let text = ps.step.text.clone();
                self.finish_key(at, n, root, parent.as_deref(), stage.freebsd.as_ref())
                    .map_err(|e| {
                        self.env
                            .reporter
                            .step_done(&info, StepResult::Failed, started.elapsed());
                        e.located(&location).with_step(&text)
                    })?;
            }
            if !matches!(self.plan.stages[at].steps[n].kind, StepKind::Layer { .. }) {
                self.env
                    .reporter
                    .step_done(&info, StepResult::Metadata, started.elapsed());
                continue;
            }
            let ps = &self.plan.stages[at].steps[n].clone();
            let StepKind::Layer {
                key, exec, pending, ..
            } = &ps.kind
            else {
                self.env
                    .reporter
                    .step_done(&info, StepResult::Metadata, started.elapsed());
                continue;
            };
            if pending.is_some() {
                return Err(internal(format!(
                    "the key of `{}` is not final when the step is reached",
                    ps.step.text
                )));
            }
            let name = SnapshotName::step(key);
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
            // The step's file flags (kept with the snapshot where the host
            // has no chflags(2)): whatever sets flags in the root takes them.
            let step_flags =
                SnapshotFlags::for_step(self.env.snapshotter, parent.as_deref(), &root);
            let outcome = step_flags.map_err(BuildError::from).and_then(|step_flags| {
                // The disk writes the step's files while it runs (the
                // commit's sync then finds little to do).
                let flusher = crate::snapshot::flush::Flusher::start(&root);
                self.execute(&ps.step.op, &ps.step.args, exec, &root, &info, &step_flags)?;
                drop(flusher);
                Ok(step_flags)
            });
            let outcome = outcome.and_then(|step_flags| {
                let mut labels: Labels = [(label::KEY.to_string(), key.to_string())].into();
                labels.extend(step_flags.labels()?);
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

    /// Finishes the key of the PKG step `n` of the stage at `at`, which
    /// awaits what it finds in its root (`root`, the committed snapshot
    /// `parent`): reads it (`FreeBsdEnv::pkg_root`), plans the build
    /// again with the answer, and takes the new plan, whose keys before
    /// this step are the old ones (checked) and whose keys from it on are
    /// final up to the next PKG step. `--cache-from` is asked for the keys
    /// that became final.
    fn finish_key(
        &mut self,
        at: usize,
        n: usize,
        root: plan::PkgRoot,
        parent: Option<&str>,
        release: Option<&plan::FreeBsdVersion>,
    ) -> Result<(), BuildError> {
        // What the step finds in its parent snapshot, the catalogues kept
        // for the steps to read.
        let dir = parent.map(|p| self.env.snapshotter.view(p)).transpose()?;
        let answer = {
            let mut kept = self.inputs.catalogues.borrow_mut();
            let freebsd = &self.env.freebsd;
            // The planner's input, unreadable: its error at the step's line,
            // as the fetch phase's are.
            freebsd
                .pkg_root(dir.as_deref(), &root.arch, release, &mut kept)
                .map_err(|e| plan::PlanError {
                    location: self.plan.stages[at].steps[n].step.location.clone(),
                    kind: plan::PlanErrorKind::Input(plan::InputError::new(e.is_user_error(), e)),
                })?
        };
        let new = self
            .inputs
            .replan(root, answer, self.recipe, self.plan_opts)?;
        let keys = |p: &Plan| -> Vec<Option<Digest>> {
            let stages = p.stages.iter().take(at + 1).enumerate();
            stages
                .flat_map(|(i, s)| s.steps.iter().take(if i == at { n } else { usize::MAX }))
                .map(|ps| match &ps.kind {
                    StepKind::Layer { key, .. } => Some(key.clone()),
                    StepKind::Metadata => None,
                })
                .collect()
        };
        if keys(&new) != keys(&self.plan) {
            return Err(internal(
                "planned again, the steps already built have other keys".into(),
            ));
        }
        if let Some(lookups) = &self.lookups {
            lookups.ask(self.env.snapshotter, &new)?;
        }
        self.plan = new;
        Ok(())
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
    /// — or, for a pkgbase base, jbuild's installer (`engine::pkgbase`)
    /// or pkg(8) on the host installs it into the prepared root (its
    /// output shown as the FROM step's).
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
        let id = crate::plan::BaseKey::new(release, platform);
        let pkgbase = self.inputs.pkgbases.borrow().get(&id).cloned();
        let rel = match &pkgbase {
            Some(base) => {
                self.env.reporter.message(
                    Level::Info,
                    &format!(
                        "installing FreeBSD {release} ({}) from {} with {}",
                        base.packages.join(", "),
                        base.url,
                        base.installer
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
        // The base's file flags (kept with the snapshot where the host has
        // no chflags(2)): the packages' flags reach its layer.
        let flags = SnapshotFlags::for_step(self.env.snapshotter, None, &root);
        let filled = flags.map_err(BuildError::from).and_then(|flags| {
            match (&rel, &pkgbase) {
                // Downloads what the cache lacks as it extracts.
                (Some(rel), _) => rel.fetch_into(&root, self.env.reporter).map(drop)?,
                (None, Some(base)) => match &base.installer {
                    Installer::Jbuild => {
                        let arch = &platform.architecture;
                        self.install_pkgbase(base, arch, &root, info, &flags)?
                    }
                    Installer::Pkg(program) => {
                        let reporter = self.env.reporter;
                        base.install(program, &root, &HostPkg, &mut |s, l| {
                            reporter.step_output(info, s, l)
                        })?
                    }
                },
                (None, None) => unreachable!("one of the two"),
            }
            Ok(flags)
        });
        let made = filled.and_then(|flags| {
            let mut labels: Labels = [(label::KEY.to_string(), key.to_string())].into();
            labels.extend(flags.labels()?);
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
}

/// The image's [`firstboot::LABEL`]: the commands of the first-start
/// script in the image's root (its top snapshot), whichever step put them
/// there — a step run now, a cached one, a FROM image's — so the label
/// says what the root holds; none when it holds no script (a base image's
/// label is not carried over a root that lost it). A script that cannot
/// be read (a RUN changed it) is said, and the label left out: it is a
/// record, not the work.
fn first_start_label(
    env: &BuildEnv<'_>,
    top: Option<&str>,
    labels: &mut std::collections::BTreeMap<String, String>,
) {
    labels.remove(firstboot::LABEL);
    let Some(top) = top else { return };
    let read = env
        .snapshotter
        .view(top)
        .map_err(|e| e.to_string())
        .and_then(|root| firstboot::read(&root).map_err(|e| e.to_string()));
    match read {
        Ok(Some(list)) if !list.is_empty() => {
            labels.insert(firstboot::LABEL.into(), firstboot::label(&list));
        }
        Ok(_) => {}
        Err(e) => env.reporter.message(
            Level::Warn,
            &format!("the image gets no {} label: {e}", firstboot::LABEL),
        ),
    }
}

/// A fault of jbuild's own (exit code 2), not the user's.
fn internal(what: String) -> BuildError {
    BuildError::io(
        format!("{what} (a jbuild bug)"),
        std::io::Error::other("internal error"),
    )
}
