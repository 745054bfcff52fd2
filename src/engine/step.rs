//! One step run: what each instruction that makes a layer does to the
//! step's root (RUN and PKG through the executor, COPY and ADD by copying,
//! the native edits), and the mounts and process a RUN gets. The build
//! loop that prepares and commits the snapshot around it is [`super::run`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::BuildError;
use super::freebsd::{self, PkgInstaller};
use super::mounts::StepMounts;
use super::native::{self, CopyOptions, Ignore};
use super::run::Run;
use crate::exec::{self, RunSpec};
use crate::fsutil::flags::FileFlags;
use crate::image::Platform;
use crate::jailfile::{self, AddSource, CopyFrom, MountKind, Op, RunMount};
use crate::plan::{self, ExecContext};
use crate::report::StepInfo;

impl Run<'_, '_> {
    /// Runs one layer-making instruction into `root`, the prepared
    /// snapshot of its step.
    pub(super) fn execute(
        &self,
        op: &Op,
        args: &BTreeMap<String, String>,
        ctx: &ExecContext,
        root: &Path,
        info: &StepInfo,
        file_flags: &dyn FileFlags,
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
            Op::Pkg {
                packages,
                bootstrap,
                scripts,
            } => match self.env.freebsd.pkg_installer {
                PkgInstaller::Jbuild => {
                    let how = super::pkg::How {
                        bootstrap: *bootstrap,
                        scripts: scripts.unwrap_or(self.env.freebsd.pkg_scripts),
                    };
                    super::pkg::install(self, packages, how, ctx, root, info, file_flags)
                }
                PkgInstaller::Pkg => self.pkg(packages, args, ctx, root, info),
            },
            Op::Copy(copy) => {
                let copy_opts = CopyOptions {
                    chown: owner_in(root, copy.chown.as_deref())?,
                    chmod: copy.chmod,
                    parents: copy.parents,
                    exclude: copy.exclude.clone(),
                    ..CopyOptions::default()
                };
                let (src_root, ignore) =
                    self.source_root(copy.from.as_ref(), "COPY --from", &ctx.platform)?;
                native::copy(
                    &src_root,
                    &copy.sources,
                    &copy.dest,
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
                let add = Add {
                    sources,
                    dest,
                    checksum: checksum.as_ref(),
                    keep_git_dir: *keep_git_dir,
                };
                let copy_opts = CopyOptions {
                    chown: owner_in(root, chown.as_deref())?,
                    chmod: *chmod,
                    exclude: exclude.clone(),
                    ..CopyOptions::default()
                };
                self.add(&add, copy_opts, ctx, root)
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

    /// `PKG` with `[pkg] installer = "pkg"`: pkg(8) run in the step's
    /// root, as `pkg install -y`.
    fn pkg(
        &self,
        packages: &[String],
        args: &BTreeMap<String, String>,
        ctx: &ExecContext,
        root: &Path,
        info: &StepInfo,
    ) -> Result<(), BuildError> {
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

    /// `ADD`: the context's files (archives unpacked), then each git
    /// repository and URL in the order written.
    fn add(
        &self,
        add: &Add<'_>,
        mut copy_opts: CopyOptions,
        ctx: &ExecContext,
        root: &Path,
    ) -> Result<(), BuildError> {
        let scratch = match &self.env.add {
            Some(places) => places.scratch()?,
            None => std::env::temp_dir(),
        };
        copy_opts.unpack = Some(native::Unpack {
            scratch,
            limits: self.env.layer_policy.limits,
        });
        let local: Vec<_> = add
            .sources
            .iter()
            .filter_map(|s| match s {
                AddSource::Context(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        if !local.is_empty() {
            native::copy(
                &self.opts.context,
                &local,
                add.dest,
                root,
                &ctx.workdir,
                self.ignore,
                &copy_opts,
            )
            .map_err(BuildError::Native)?;
        }
        // Fetched trees and downloads are copied as they are, not unpacked.
        let opts = CopyOptions {
            unpack: None,
            ..copy_opts
        };
        for s in add.sources {
            match s {
                AddSource::Git { url, reference } => {
                    let mut git = self.inputs.git.borrow_mut();
                    let places = self.env.add.as_ref();
                    let commit = git.commit(places, url, reference.as_deref())?;
                    let tree = git.checkout(places, url, &commit, add.keep_git_dir)?;
                    super::add::copy_tree(tree.path(), add.dest, root, &ctx.workdir, &opts)?;
                }
                AddSource::Url(url) => {
                    let places = self
                        .env
                        .add
                        .as_ref()
                        .ok_or_else(|| super::add::AddError::NoPlaces(url.clone()))?;
                    let max = self.env.layer_policy.limits.max_size;
                    // Without --checksum: the file the fetch phase downloaded.
                    let sum = add
                        .checksum
                        .cloned()
                        .or_else(|| self.inputs.downloaded(url));
                    let (_, cached) = places.download(url, sum.as_ref(), max)?;
                    let name = jailfile::url_file_name(url).unwrap_or("download");
                    let scratch = places.scratch()?;
                    super::add::copy_download(
                        &cached,
                        name,
                        &scratch,
                        add.dest,
                        root,
                        &ctx.workdir,
                        &opts,
                    )?;
                }
                AddSource::Context(_) => {}
            }
        }
        Ok(())
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

/// An `ADD` instruction's operands, as [`Run::add`] reads them.
struct Add<'a> {
    sources: &'a [AddSource],
    dest: &'a str,
    checksum: Option<&'a crate::digest::Digest>,
    keep_git_dir: bool,
}

/// The owner a `--chown` names, looked up in `root`'s own user database.
fn owner_in(root: &Path, spec: Option<&str>) -> Result<Option<(u32, u32)>, BuildError> {
    match spec {
        Some(spec) => Ok(Some(exec::user::resolve_owner(root, spec)?)),
        None => Ok(None),
    }
}
