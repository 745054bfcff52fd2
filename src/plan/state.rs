//! The image configuration as it stands after each instruction: what a RUN
//! step runs with (environment, user, working directory, jail parameters)
//! and what the final image config records.

pub use crate::image::config::{HistoryEntry, ImageState, JAIL_LABEL_PREFIX};
use crate::jailfile::{Command, Healthcheck, Op};

/// Applies a metadata instruction to `state`. Filesystem instructions
/// leave the state as it is.
pub fn apply(state: &mut ImageState, op: &Op) {
    match op {
        Op::Env(pairs) => pairs.iter().for_each(|(k, v)| state.set_env(k, v)),
        Op::Label(pairs) => pairs.iter().for_each(|(k, v)| {
            state.labels.insert(k.clone(), v.clone());
        }),
        Op::User(u) => state.user = Some(u.clone()),
        Op::Workdir(w) => state.workdir = Some(w.clone()),
        Op::Expose(ports) => {
            for p in ports {
                let p = if p.contains('/') {
                    p.clone()
                } else {
                    format!("{p}/tcp")
                };
                state.exposed_ports.insert(p);
            }
        }
        Op::Volume(v) => state.volumes.extend(v.iter().cloned()),
        Op::Cmd(c) => {
            state.cmd = Some(argv_in(c, state.docker.shell.as_deref()));
            state.cmd_set_here = true;
        }
        Op::Entrypoint(c) => {
            state.entrypoint = Some(argv_in(c, state.docker.shell.as_deref()));
            if !state.cmd_set_here {
                state.cmd = None;
            }
        }
        Op::Jail(params) => {
            for (k, v) in params {
                match state.jail.iter_mut().find(|(name, _)| name == k) {
                    Some(slot) => slot.1 = v.clone(),
                    None => state.jail.push((k.clone(), v.clone())),
                }
            }
        }
        Op::StopSignal(sig) => state.stop_signal = Some(sig.clone()),
        Op::Healthcheck(h) => state.docker.healthcheck = Some(healthcheck_json(h)),
        Op::Onbuild(trigger) => state.docker.onbuild.push(trigger.clone()),
        Op::Shell(shell) => state.docker.shell = Some(shell.clone()),
        _ => {}
    }
}

/// A HEALTHCHECK as Docker's config writes it: durations in nanoseconds,
/// those not given left out.
fn healthcheck_json(h: &Healthcheck) -> serde_json::Value {
    let mut v = serde_json::json!({ "Test": h.test });
    let fields = [
        ("Interval", h.interval),
        ("Timeout", h.timeout),
        ("StartPeriod", h.start_period),
        ("StartInterval", h.start_interval),
        ("Retries", h.retries),
    ];
    for (name, value) in fields {
        if let Some(n) = value {
            v[name] = serde_json::json!(n);
        }
    }
    v
}

/// The argv a CMD or ENTRYPOINT records: shell form runs through `/bin/sh -c`.
pub fn argv(c: &Command) -> Vec<String> {
    argv_in(c, None)
}

/// Like [`argv`], the shell form run by `shell` (`SHELL [...]`) when set.
pub fn argv_in(c: &Command, shell: Option<&[String]>) -> Vec<String> {
    match (c, shell) {
        (Command::Shell(s), Some(sh)) => sh.iter().cloned().chain([s.clone()]).collect(),
        (Command::Shell(s), None) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
        (Command::Exec(v), _) => v.clone(),
    }
}
