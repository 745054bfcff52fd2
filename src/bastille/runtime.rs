//! The instructions that only mean something for a running jail (MOUNT,
//! RDR, LIMITS, CONFIG, TAGS, SERVICE) and SYSRC: kept with the image as
//! VOLUME, EXPOSE, labels and JAIL parameters, or dropped with a note; a
//! SERVICE start is carried to the command steps after it
//! ([`super::services::with_services`]).

use super::emit::word;
use super::services::{sh_quote, Running};
use super::source::{is_name, with_help, words, SrcLine};
use super::symbolic;
use super::translate::{absolute, Scope, Translator, R};

/// rctl(8) resources (FreeBSD 14), for LIMITS.
const RCTL_RESOURCES: &[&str] = &[
    "cputime",
    "datasize",
    "stacksize",
    "coredumpsize",
    "memoryuse",
    "memorylocked",
    "maxproc",
    "openfiles",
    "vmemoryuse",
    "pseudoterminals",
    "swapuse",
    "nthr",
    "msgqqueued",
    "msgqsize",
    "nmsgq",
    "nsem",
    "nsemop",
    "nshm",
    "shmsize",
    "wallclock",
    "pcpu",
    "readbps",
    "writebps",
    "readiops",
    "writeiops",
];

impl Translator<'_> {
    /// MOUNT host jail [type options dump pass]: a VOLUME, and the fstab
    /// line as a label for `jbuild create` (paths in the jail absolute).
    pub(super) fn mount(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        let full: Vec<String> =
            match w.len() {
                2 => vec![
                    w[0].clone(),
                    w[1].clone(),
                    "nullfs".into(),
                    "ro".into(),
                    "0".into(),
                    "0".into(),
                ],
                6 => w.to_vec(),
                _ => return Err(with_help(
                    line.error_word(
                        &line.raw_args(),
                        "MOUNT takes fstab fields: host-path jail-path [type options dump pass]",
                    ),
                    "e.g. MOUNT /usr/ports usr/ports nullfs ro 0 0",
                )),
            };
        let jail = absolute(&full[1]);
        let v: Vec<String> = full.iter().map(|f| self.val(f)).collect();
        if !v[0].starts_with('/') && v[2] == "nullfs" {
            return Err(
                line.error_word(&full[0], "the host path of a nullfs mount must be absolute")
            );
        }
        if !matches!(v[4].as_str(), "0" | "1") || !v[5].chars().all(|c| c.is_ascii_digit()) {
            return Err(line.error_word(&full[4], "dump and pass must be numbers (usually 0 0)"));
        }
        let entry = format!(
            "{} {} {} {} {} {}",
            full[0], jail, full[2], full[3], full[4], full[5]
        );
        self.emit(line, format!("VOLUME {}", word(&jail)));
        self.emit(
            line,
            format!(
                "LABEL {}={}",
                word(&format!("org.jbuild.fstab.{jail}")),
                word(&entry)
            ),
        );
        Ok(())
    }

    pub(super) fn tags(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        let (op, tags) = match w.first().map(String::as_str) {
            Some("add") => ("add", &w[1..]),
            Some("delete") | Some("remove") => ("delete", &w[1..]),
            _ => ("add", w),
        };
        if tags.is_empty() {
            return Err(line.error_cmd("TAGS needs at least one tag"));
        }
        for t in tags {
            if op == "add" && !self.tags.contains(t) {
                self.tags.push(t.clone());
            } else if op == "delete" {
                self.tags.retain(|x| x != t);
            }
        }
        let all = self.tags.join(" ");
        self.emit(line, format!("LABEL org.jbuild.tags={}", word(&all)));
        Ok(())
    }

    /// CONFIG set PROPERTY VALUE: a jail(8) parameter with the image.
    pub(super) fn config(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        match w.first().map(String::as_str) {
            Some("set") => {}
            Some("get") => {
                self.note(line, "CONFIG get: nothing to read while building; ignored");
                return Ok(());
            }
            Some(other) => {
                return Err(with_help(
                    line.error_word(
                        other,
                        format!("CONFIG `{other}` cannot be kept with an image"),
                    ),
                    "only CONFIG set PROPERTY VALUE is stored (as a JAIL parameter)",
                ))
            }
            None => return Err(line.error_cmd("CONFIG needs `set PROPERTY VALUE`")),
        }
        let rest: Vec<&str> = w[1..].iter().map(String::as_str).collect();
        let joined = rest.join(" ");
        let joined = joined.trim().trim_end_matches(';').trim();
        let (name, value) = match joined.split_once('=') {
            Some((n, v)) => (n.trim().to_string(), Some(v.trim().to_string())),
            None => match joined.split_once(' ') {
                Some((n, v)) => (n.to_string(), Some(v.trim().to_string())),
                None => (joined.to_string(), None),
            },
        };
        let name_v = self.val(&name);
        if name_v.is_empty()
            || !name_v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._".contains(c))
        {
            return Err(with_help(
                line.error_word(&name, format!("`{name}` is not a jail parameter name")),
                "CONFIG set allow.mlock 1, or CONFIG set allow.mount.procfs",
            ));
        }
        let text = match value {
            Some(v) => format!("{}={}", word(&name), word(v.trim_matches('"'))),
            None => word(&name),
        };
        self.emit(line, format!("JAIL {text}"));
        Ok(())
    }

    /// LIMITS resource value: an rctl(8) rule with the image, as label
    /// `org.jbuild.rctl.<resource>`; `jbuild create --bastille` writes it
    /// to the jail's rctl.conf.
    pub(super) fn limits(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        if w.len() != 2 {
            return Err(with_help(
                line.error_word(&line.raw_args(), "LIMITS takes a resource and a value"),
                "e.g. LIMITS memoryuse 1G",
            ));
        }
        let res = self.val(&w[0]);
        let res = res.as_str();
        if !RCTL_RESOURCES.contains(&res) {
            return Err(with_help(
                line.error_word(res, format!("`{res}` is not an rctl(8) resource")),
                format!("one of: {}", RCTL_RESOURCES.join(", ")),
            ));
        }
        let value = w[1].split_once('/').map(|(v, _)| v).unwrap_or(&w[1]);
        let value = value.rsplit_once('=').map(|(_, v)| v).unwrap_or(value);
        self.emit(line, format!("LABEL org.jbuild.rctl.{res}={}", word(value)));
        Ok(())
    }

    /// RDR [ipv4|ipv6|dual iface src dst] proto hostport jailport: the
    /// jail port is EXPOSEd, the rule kept as a label for pf.
    pub(super) fn rdr(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        if matches!(
            w.first().map(String::as_str),
            Some("list" | "clear" | "reset")
        ) {
            self.note(
                line,
                &format!("RDR {}: acts on a running jail; ignored", w[0]),
            );
            return Ok(());
        }
        let tail = match w.len() {
            3 => w,
            7 if matches!(w[0].as_str(), "ipv4" | "ipv6" | "dual") => &w[4..],
            _ => {
                return Err(with_help(
                    line.error_word(&line.raw_args(), "RDR takes proto host-port jail-port"),
                    "e.g. RDR tcp 8080 80 (or ipv4 vtnet0 any any tcp 8080 80)",
                ))
            }
        };
        let proto = self.val(&tail[0]);
        let proto = proto.as_str();
        if !matches!(proto, "tcp" | "udp") {
            return Err(line.error_word(proto, format!("RDR protocol `{proto}`: use tcp or udp")));
        }
        for p in &tail[1..] {
            if !self.val(p).parse::<u16>().is_ok_and(|n| n > 0) {
                return Err(line.error_word(p, format!("`{p}` is not a port (1-65535)")));
            }
        }
        self.emit(
            line,
            format!("EXPOSE {}", word(&format!("{}/{proto}", tail[2]))),
        );
        self.emit(
            line,
            format!(
                "LABEL {}={}",
                word(&format!("org.jbuild.rdr.{proto}.{}", tail[1])),
                word(&w.join(" "))
            ),
        );
        Ok(())
    }

    /// SERVICE name ACTION \[args\]: enable/disable edit rc.conf; a start or
    /// a stop of a started service is [`Translator::service_state`]'s
    /// (before this); the other actions on a running service (`reload`,
    /// `status`, a stop of one not started) change no file, so they are
    /// dropped with a note; any other action (`initdb`, `configtest`,
    /// `rcvar`, ...) is a step running `service name ACTION` in the build
    /// jail.
    pub(super) fn service(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        let [name, action, rest @ ..] = w else {
            return Err(with_help(
                line.error_word(
                    &line.raw_args(),
                    "SERVICE takes a service name and an action",
                ),
                "e.g. SERVICE nginx enable, or SERVICE postgresql initdb",
            ));
        };
        match service_action(&self.val(action)) {
            ServiceAction::RcConf if rest.is_empty() => {
                self.emit(line, format!("SERVICE {} {}", word(name), word(action)));
            }
            // Starts and stops are [`Translator::service_state`]'s; what
            // is left reads or pokes a running service, changing no file.
            ServiceAction::Start | ServiceAction::Stop | ServiceAction::Running => self.note(
                line,
                &format!(
                    "SERVICE {name} {action}: no service runs while building; ignored \
                     (the jail starts it when it boots, if rc.conf enables it: SYSRC or SERVICE {name} enable)"
                ),
            ),
            ServiceAction::RcConf | ServiceAction::Step => {
                let argv = ["service", name.as_str(), action.as_str()]
                    .into_iter()
                    .chain(rest.iter().map(String::as_str));
                let script = shlex::try_join(argv)
                    .map_err(|_| line.error_cmd("SERVICE arguments cannot hold a NUL byte"))?;
                self.run(line, &script);
            }
        }
        Ok(())
    }

    /// SERVICE name start|stop (and their rc.subr forms). Bastille applies
    /// a template to a live jail, so a service it starts keeps running for
    /// the lines after it: `SERVICE mysql-server restart` then `CMD mysql
    /// -e "CREATE DATABASE ..."` (the official wordpress template). A build
    /// runs each step in a jail of its own and keeps no process, so the
    /// start is not dropped but carried: every later step that runs a
    /// command starts the running services first and stops them after
    /// ([`super::services::with_services`]); a stop ends that. Returns
    /// whether the line was one of these.
    pub(super) fn service_state(
        &mut self,
        line: &SrcLine,
        scope: &Scope,
        raw: &str,
        valued: &str,
    ) -> R<bool> {
        let w = words(line, valued)?;
        let [name, action, ..] = w.as_slice() else {
            return Ok(false);
        };
        match service_action(action) {
            ServiceAction::Start => {
                // As Bastille runs it: the line's text is the arguments of
                // service(8), its ARGs left for the step's shell as CMD's.
                let start =
                    symbolic::script(&format!("service {raw}"), &|n| self.script_arg(scope, n));
                let name_text = raw
                    .split_whitespace()
                    .next()
                    .filter(|t| !t.contains(['\'', '"', '\\']))
                    .map(str::to_string)
                    .unwrap_or_else(|| sh_quote(name));
                let stop = symbolic::script(&format!("service {name_text} onestop"), &|n| {
                    self.script_arg(scope, n)
                });
                self.running.retain(|r| r.name != *name);
                self.running.push(Running {
                    name: name.clone(),
                    start,
                    stop,
                });
                self.note(
                    line,
                    &format!(
                        "SERVICE {name} {action}: an image keeps no service running; each later step of this \
                         template that runs a command (CMD, SERVICE {name} ACTION, ...) runs `service {name} {action}` \
                         first and `service {name} onestop` after, as the service would be running in Bastille's jail \
                         (the jail starts it when it boots if rc.conf enables it)"
                    ),
                );
                Ok(true)
            }
            ServiceAction::Stop => match self.running.iter().position(|r| r.name == *name) {
                Some(at) => {
                    self.running.remove(at);
                    self.note(
                        line,
                        &format!("SERVICE {name} {action}: the later steps run without it"),
                    );
                    Ok(true)
                }
                None => Ok(false),
            },
            _ => Ok(false),
        }
    }

    /// SYSRC [-f file] name=value ...: one Jailfile SYSRC per assignment.
    pub(super) fn sysrc(&mut self, line: &SrcLine, w: &[String]) -> R<()> {
        let mut file: Option<String> = None;
        let mut i = 0;
        let mut any = false;
        while i < w.len() {
            let a = &w[i];
            if a.starts_with('-') && any {
                return Err(with_help(
                    line.error_word(a, format!("`{a}` comes after an assignment")),
                    "sysrc(8) takes its options first: SYSRC -f FILE name=value",
                ));
            }
            if a == "-f" {
                let Some(f) = w.get(i + 1) else {
                    return Err(line.error_word(a, "-f needs a file"));
                };
                file = Some(absolute(f));
                i += 2;
                continue;
            }
            if a.starts_with('-') {
                return Err(with_help(
                    line.error_word(a, format!("sysrc option `{a}` is not supported")),
                    "SYSRC sets variables: name=value, name+=value or name-=value",
                ));
            }
            let Some((name, _)) = a.split_once('=') else {
                return Err(with_help(
                    line.error_word(a, format!("`{a}` does not assign a value")),
                    "write name=value",
                ));
            };
            let name = self.val(name);
            let name = name.trim_end_matches(['+', '-']);
            if !is_name(name) {
                return Err(line.error_word(a, format!("`{name}` is not an rc.conf variable name")));
            }
            let f = file
                .as_ref()
                .map(|f| format!("-f {} ", word(f)))
                .unwrap_or_default();
            let (lhs, value) = a.split_once('=').expect("checked above");
            self.emit(line, format!("SYSRC {f}{lhs}={}", word(value)));
            any = true;
            i += 1;
        }
        if !any {
            return Err(line.error_cmd("SYSRC needs name=value"));
        }
        Ok(())
    }
}

/// What `SERVICE name ACTION` means for an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ServiceAction {
    /// `enable`/`disable`: an rc.conf edit.
    RcConf,
    /// `start`, `restart`: the service runs for the later lines.
    Start,
    /// `stop`: it does not any more.
    Stop,
    /// `reload`, `status`, `poll`: acts on a running service, changing no
    /// file of the image.
    Running,
    /// Anything else: run `service name ACTION` in the build jail.
    Step,
}

pub(super) fn service_action(action: &str) -> ServiceAction {
    if matches!(action, "enable" | "disable") {
        return ServiceAction::RcConf;
    }
    // rc.subr(8)'s prefixes.
    let base = ["one", "force", "quiet", "fast"]
        .iter()
        .find_map(|p| action.strip_prefix(p))
        .unwrap_or(action);
    match base {
        "start" | "restart" => ServiceAction::Start,
        "stop" => ServiceAction::Stop,
        "reload" | "status" | "poll" => ServiceAction::Running,
        _ => ServiceAction::Step,
    }
}
