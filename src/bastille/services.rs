//! The services a template started: Bastille applies a template to a live
//! jail, so a service a `SERVICE name start` line starts keeps running for
//! the lines after it. A build keeps no process between its steps, so each
//! later command step starts them itself ([`with_services`]).

/// A service a `SERVICE name start` left running.
#[derive(Debug, Clone)]
pub(super) struct Running {
    /// Its name, ARGs put in.
    pub(super) name: String,
    /// The shell command that starts it, as the line wrote it.
    pub(super) start: String,
    /// `service name onestop`: stops it whether or not rc.conf enables it.
    pub(super) stop: String,
}

/// `script` as a step runs it while `running` services run: each started
/// (in order; a failed start fails the step, saying so), the script in a
/// shell of its own (so its own `exit` or `trap` still ends only it), then
/// each stopped (in reverse order) so it ends cleanly before the step's
/// jail is taken down, and the script's status is the step's. Unchanged
/// when none runs.
pub(super) fn with_services(running: &[Running], script: &str) -> String {
    if running.is_empty() {
        return script.to_string();
    }
    let mut s = String::new();
    for r in running {
        // The step is named by its own line; say which start failed.
        let said = sh_quote(&format!(
            "jbuild: `{}`, started for this step by an earlier SERVICE line, failed",
            r.start
        ));
        s.push_str(&format!(
            "{} || {{ s=$?; echo {said} >&2; exit $s; }}\n",
            r.start
        ));
    }
    s.push_str(&format!("/bin/sh -c {}\n", sh_quote(script)));
    s.push_str("status=$?\n");
    for r in running.iter().rev() {
        s.push_str(&format!("{}\n", r.stop));
    }
    s.push_str("exit $status");
    s
}

/// `s` as one sh word, in single quotes.
pub(super) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
