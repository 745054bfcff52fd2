//! `jbuild run`: an image's program, or a command, run in it on this
//! terminal; jbuild exits with its exit code.

use anyhow::anyhow;
use clap::{Args, ValueEnum};

use super::common::pulling::Unpacking;
use super::{Ctx, Failure};
use jbuild::create::run::{Network, RunRequest, Volume};
use jbuild::image::Unpacker;

#[derive(Args, Debug)]
#[command(
    after_help = "On Linux, an image for linux/* runs in the namespaces RUN steps use, \
over a writable snapshot of the image removed after it (nothing of a run is kept); an image \
for FreeBSD is refused: it needs a FreeBSD host. On FreeBSD, the image becomes a jail as \
`jbuild create` makes it (a ZFS clone where it can; the image's jail parameters need the same \
consent), started with nothing in it, the command attached with jexec(8), then stopped; with \
--rm (the default when a command is given) the jail, its root and its entry are removed.\n\n\
The exit status is the command's (128 + the signal's number when a signal ended it); 1 or 2 \
when jbuild could not run it.\n\n\
Examples:\n  jbuild run --rm busybox:1 echo hello\n  \
jbuild run -e GREETING=hi -v /srv/data:/data:ro web:1 /bin/sh -c 'ls /data'\n  \
jbuild run --name try web:1"
)]
pub struct RunArgs {
    /// Remove what the run made when it ends (the default when a COMMAND
    /// is given).
    #[arg(long)]
    rm: bool,
    /// The jail's name (the hostname on Linux); default jbuild-run-PID.
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Set an environment variable over the image's (repeatable).
    #[arg(short = 'e', long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// Make the host's SRC seen at DST inside, read-only with `:ro`
    /// (repeatable).
    #[arg(short = 'v', long = "volume", value_name = "SRC:DST[:ro]")]
    volumes: Vec<Volume>,
    /// `none`: only loopback (Linux), no address (FreeBSD); `host`: the
    /// host's network.
    #[arg(long, value_enum, default_value_t = NetworkArg::None)]
    network: NetworkArg,
    /// Agree to a jail parameter the image asks for that weakens the jail
    /// or acts on the host, as for `jbuild create` (FreeBSD).
    #[arg(long = "allow-jail-param", value_name = "NAME")]
    allow_jail_params: Vec<String>,
    /// The image in the local store: a name, an image ID or a digest prefix.
    #[arg(value_name = "IMAGE")]
    image: String,
    /// The command, in place of the image's Cmd (its Entrypoint stays).
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum NetworkArg {
    None,
    Host,
}

/// Runs it; `Ok` carries the command's exit code.
pub fn run(ctx: &Ctx, a: RunArgs) -> Result<i32, Failure> {
    let mut env = Vec::new();
    for kv in &a.env {
        match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => env.push((k.to_string(), v.to_string())),
            _ => {
                return Err(Failure::user(anyhow!(
                    "-e `{kv}`: write -e NAME=VALUE (the name may not be empty)"
                )))
            }
        }
    }
    let mut allowed = ctx.settings.freebsd.allow_jail_params.clone();
    allowed.extend(a.allow_jail_params.iter().cloned());
    let req = RunRequest {
        remove: a.rm || !a.command.is_empty(),
        image: a.image,
        name: a.name,
        command: a.command,
        env,
        volumes: a.volumes,
        network: match a.network {
            NetworkArg::None => Network::None,
            NetworkArg::Host => Network::Host,
        },
        allowed_jail_params: allowed,
    };
    let unpacking = Unpacking::open(ctx, ctx.layer_policy(false, false))?;
    let ran = on_this_host(&unpacking.unpacker(), &req).map_err(Failure::from)?;
    if !ctx.quiet {
        for note in &ran.notes {
            eprintln!("note: {note}");
        }
        if let Some(kept) = &ran.kept {
            eprintln!(
                "the jail {} stays (stopped) in {}; its entry is in {}",
                kept.name,
                kept.root.display(),
                kept.conf.display()
            );
        }
    }
    Ok(ran.exit_code())
}

#[cfg(target_os = "linux")]
fn on_this_host(
    unpacker: &Unpacker<'_>,
    req: &RunRequest,
) -> Result<jbuild::create::run::Ran, jbuild::create::run::RunError> {
    let executor = jbuild::exec::host_executor()?;
    jbuild::create::run::run_linux(unpacker, executor.as_ref(), req)
}

#[cfg(target_os = "freebsd")]
fn on_this_host(
    unpacker: &Unpacker<'_>,
    req: &RunRequest,
) -> Result<jbuild::create::run::Ran, jbuild::create::run::RunError> {
    use jbuild::create::run::jail;
    jail::run_freebsd(
        unpacker,
        req,
        &jail::Places::default(),
        &mut jail::SystemRunner,
    )
}

#[cfg(not(any(target_os = "linux", target_os = "freebsd")))]
fn on_this_host(
    _: &Unpacker<'_>,
    _: &RunRequest,
) -> Result<jbuild::create::run::Ran, jbuild::create::run::RunError> {
    Err(jbuild::create::run::RunError::Refused(
        "`jbuild run` needs FreeBSD or Linux".into(),
    ))
}
