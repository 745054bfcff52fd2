//! The image configuration as it stands after each instruction: what a RUN
//! step runs with (environment, user, working directory, jail parameters)
//! and what the final image config records.

pub use crate::image::config::{HistoryEntry, ImageState, JAIL_LABEL_PREFIX};
use crate::jailfile::{Command, Op};

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
            state.cmd = Some(argv(c));
            state.cmd_set_here = true;
        }
        Op::Entrypoint(c) => {
            state.entrypoint = Some(argv(c));
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
        _ => {}
    }
}

/// The argv a CMD or ENTRYPOINT records: shell form runs through `/bin/sh -c`.
pub fn argv(c: &Command) -> Vec<String> {
    match c {
        Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
        Command::Exec(v) => v.clone(),
    }
}
