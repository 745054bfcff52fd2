//! Build contexts that are no directory here, for `build`: what ADD and
//! the context fetch keep and how git is given credentials, and the
//! context fetched with the arguments pointed into it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::anyhow;

use crate::cli::{Ctx, Failure};
use jbuild::engine;
use jbuild::jailfile;
use jbuild::transport::RegistryOptions;

/// Where ADD and a fetched context keep what they fetch, and the
/// credentials git is given (the keychain, `--secret GIT_AUTH_TOKEN`...).
pub fn add_places(
    ctx: &Ctx,
    registry: &RegistryOptions,
    secrets: &BTreeMap<String, jbuild::exec::SecretData>,
) -> Result<engine::AddPlaces, Failure> {
    let http = std::sync::Arc::new(jbuild::transport::http::Http::new(registry.clone()));
    Ok(
        engine::AddPlaces::new(ctx.paths.root().to_path_buf(), http).with_git_credentials(
            engine::GitCredentials {
                keychain: registry.keychain.clone(),
                secrets: secrets.clone(),
            },
        ),
    )
}

/// The context `context_arg` names fetched when it is no directory here
/// (a git repository, an archive, standard input), the arguments then
/// pointing into it: its directory, and `-f` (`file_arg`) as a path in it (as docker reads `-f` with a
/// remote context).
pub fn remote(
    ctx: &Ctx,
    context_arg: &mut PathBuf,
    file_arg: &mut Option<PathBuf>,
    places: &engine::AddPlaces,
) -> Result<Option<engine::context::RemoteContext>, Failure> {
    use engine::context::{self, ContextSpec};
    let spec = ContextSpec::parse(&context_arg.to_string_lossy());
    if matches!(spec, ContextSpec::Dir(_)) {
        return Ok(None);
    }
    let file_is_stdin = file_arg.as_deref() == Some(std::path::Path::new("-"));
    if spec == ContextSpec::Stdin && file_is_stdin {
        return Err(Failure::user(anyhow!(
            "the context `-` and `-f -` both read standard input: give the recipe as a file in the archive (-f NAME) or the context as a directory"
        )));
    }
    let limits = ctx.layer_policy(false, false).limits;
    let fetched = context::fetch(&spec, places, &limits, &mut std::io::stdin().lock())
        .map_err(Failure::from)?;
    let Some(fetched) = fetched else {
        return Ok(None);
    };
    if !ctx.json && !ctx.quiet {
        let at = fetched
            .source
            .revision
            .as_ref()
            .map(|c| format!(" at commit {c}"))
            .unwrap_or_default();
        eprintln!("context: {}{at}", fetched.source.uri);
    }
    if fetched.recipe.is_some() && file_arg.is_some() {
        return Err(Failure::user(anyhow!(
            "the context {} is a recipe, not an archive, so -f has nothing to name in it",
            context_arg.display()
        )));
    }
    if let Some(file) = file_arg.as_mut().filter(|_| !file_is_stdin) {
        if file.is_absolute() || file.components().any(|c| c.as_os_str() == "..") {
            return Err(Failure::user(anyhow!(
                "-f {}: with the context {}, -f names a file in it (a relative path without `..`)",
                file.display(),
                context_arg.display()
            )));
        }
    }
    let named = context_arg.display().to_string();
    *context_arg = fetched.dir.clone();
    // The recipe, found or named, is read from the fetched tree only: a
    // link in it that leads out is followed as if the tree were `/`.
    let inside = |name: &std::path::Path| {
        jbuild::fsutil::resolve_in_root(&fetched.dir, name, true).map_err(Failure::internal)
    };
    match &file_arg {
        Some(f) if !file_is_stdin => *file_arg = Some(inside(f)?),
        Some(_) => {}
        None if fetched.recipe.is_some() => {}
        // A Bastille template is read by its own rules (INCLUDEs in it).
        None if jbuild::bastille::is_template(&fetched.dir) => {}
        None => {
            let found = jailfile::RECIPE_NAMES
                .iter()
                .map(|name| inside(std::path::Path::new(name)))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .find(|path| path.is_file());
            let Some(found) = found else {
                return Err(Failure::user(anyhow!(
                    "no recipe in the context {named}: looked for {} (a link that leads out of it is not followed); give one with -f FILE",
                    jailfile::RECIPE_NAMES.join(", ")
                )));
            };
            *file_arg = Some(found);
        }
    }
    if fetched.recipe.is_some() {
        // Read as `-f -` is, named for the context.
        *file_arg = Some(std::path::PathBuf::from("-"));
    }
    Ok(Some(fetched))
}
