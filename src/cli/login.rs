//! `jbuild login` and `jbuild logout`: check credentials against a registry
//! and keep them in the keychain (docker's config.json or its credential
//! helper, see `jbuild::keychain`), or forget them.

use std::io::{IsTerminal, Read};

use clap::Args;
use serde_json::json;

use jbuild::keychain::{canonical_registry, Credential, Secret};
use jbuild::transport::registry::{reach, verify};
use jbuild::transport::{self, TransportError};

use super::common::access::{AuthfileArg, RegistryArgs};
use super::common::prompt;
use super::{CmdResult, Ctx, Failure};

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    jbuild login registry.lan:5000        (asks for the user name and password)\n  \
    echo \"$TOKEN\" | jbuild login ghcr.io -u octocat --password-stdin\n  \
    jbuild login registry.lan:5000 -u ci --password-stdin < secret.txt\n  \
    jbuild logout ghcr.io")]
pub struct LoginArgs {
    /// The registry, `host[:port]` (default: Docker Hub).
    #[arg(value_name = "REGISTRY", default_value = "docker.io")]
    registry: String,
    /// The user name (asked for on a terminal when not given).
    #[arg(short, long)]
    username: Option<String>,
    /// The password (it lands in your shell history: prefer --password-stdin).
    #[arg(short, long, conflicts_with = "password_stdin")]
    password: Option<Secret>,
    /// Read the password (or token) from standard input. Without it and
    /// -p, the password is asked for on a terminal, without echo.
    #[arg(long)]
    password_stdin: bool,
    #[command(flatten)]
    access: RegistryArgs,
}

#[derive(Args, Debug)]
pub struct LogoutArgs {
    /// The registry, `host[:port]` (default: Docker Hub).
    #[arg(value_name = "REGISTRY", default_value = "docker.io")]
    registry: String,
    #[command(flatten)]
    auth: AuthfileArg,
}

fn registry_name(raw: &str) -> Result<String, Failure> {
    let r = canonical_registry(raw);
    let valid = !r.is_empty()
        && r.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if valid {
        Ok(r)
    } else {
        Err(Failure::user(anyhow::anyhow!(
            "`{raw}` is not a registry name: give a host, or host:port (e.g. registry.lan:5000)"
        )))
    }
}

pub fn login(ctx: &Ctx, a: LoginArgs) -> CmdResult {
    let registry = registry_name(&a.registry)?;
    let asked = |e: std::io::Error| {
        Failure::user(anyhow::Error::new(e).context("cannot read the answer from the terminal"))
    };
    // A terminal is asked only when nothing else says (never with
    // --password-stdin: standard input then holds the password).
    let ask = prompt::interactive() && !a.password_stdin;
    let username = match a.username.filter(|u| !u.is_empty()) {
        Some(u) => u,
        None if ask => prompt::line("Username: ").map_err(asked)?,
        None => {
            return Err(Failure::user(anyhow::anyhow!(
                "login needs a user name: jbuild login {registry} -u USER --password-stdin \
                 (on a terminal, jbuild asks for it)"
            )))
        }
    };
    if username.is_empty() {
        return Err(Failure::user(anyhow::anyhow!("the user name is empty")));
    }
    let password = if a.password_stdin {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| {
            Failure::user(anyhow::anyhow!(
                "cannot read the password from standard input: {e}"
            ))
        })?;
        // `echo secret |` adds a newline that is not part of the secret.
        s.trim_end_matches(['\n', '\r']).to_string()
    } else if let Some(p) = a.password {
        if !ctx.quiet {
            eprintln!("warning: a password given with -p lands in your shell history and the process list; use --password-stdin");
        }
        p.expose().to_string()
    } else if ask {
        prompt::secret("Password: ").map_err(asked)?
    } else {
        let hint = if std::io::stdin().is_terminal() {
            ""
        } else {
            " (standard input is not read unless you say --password-stdin)"
        };
        return Err(Failure::user(anyhow::anyhow!(
            "login needs a password: pipe it in with --password-stdin, or give -p PASSWORD{hint}"
        )));
    };
    if password.is_empty() {
        return Err(Failure::user(anyhow::anyhow!("the password is empty")));
    }
    jbuild::keychain::redact::remember(Some(&username), &password);
    let cred = Credential::Basic {
        username: username.clone(),
        password: Secret::new(password),
    };
    let keychain = a.access.auth.keychain()?;

    let cannot = |e: TransportError| Failure::context(e, format!("cannot log in to {registry}"));
    let options = a.access.options(ctx)?;
    // One runtime for both: the HTTP client `reach` builds keeps its
    // connections on the runtime it was first used in.
    let verified = transport::block_on(async {
        let ep = reach(&registry, &options).await?;
        Ok::<_, TransportError>(verify(&ep.http, &registry, &ep.base, &cred).await)
    })
    .map_err(cannot)?;
    verified.map_err(cannot)?;
    keychain.store(&registry, &cred).map_err(|e| {
        Failure::user(
            anyhow::Error::new(e)
                .context("the login worked, but the credentials could not be kept"),
        )
    })?;
    if ctx.json {
        outln!(
            "{}",
            json!({"registry": registry, "username": username, "logged_in": true})
        );
    } else if !ctx.quiet {
        outln!("Login succeeded: {username} at {registry}");
    }
    Ok(())
}

pub fn logout(ctx: &Ctx, a: LogoutArgs) -> CmdResult {
    let registry = registry_name(&a.registry)?;
    let keychain = a.auth.keychain()?;
    let removed = keychain.erase(&registry)?;
    if ctx.json {
        outln!("{}", json!({"registry": registry, "removed": removed}));
    } else if !ctx.quiet {
        if removed {
            outln!("Removed the credentials for {registry}");
        } else {
            outln!("Not logged in to {registry}");
        }
    }
    Ok(())
}
