//! The user's consent: which of an image's parameters a jail gets, and
//! the refusal that names every one still needing consent.

use super::judge::{ImageParam, Judgement, FSTAB_LABEL};
use crate::blame::Blame;

/// The parameters the user agreed to: the configuration's
/// `[freebsd] allow_jail_params`, then `--allow-jail-param` (`build`,
/// `create` and any command that makes a jail take the same two).
pub fn allowed(configured: &[String], given: &[String]) -> Vec<String> {
    let mut allowed = configured.to_vec();
    allowed.extend(given.iter().cloned());
    allowed
}

#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("image {image}: {why}; no jail was written")]
    Invalid { image: String, why: String },
    #[error("image {image} asks for jail parameters that weaken the jail or act on the host: {}; no jail was written. If you trust the image with them: jbuild create {} (or list them in [freebsd] allow_jail_params)", list(.params), agree(.params))]
    NeedsConsent {
        image: String,
        /// `(parameter as shown, label, why)`.
        params: Vec<(String, String, String)>,
    },
}

fn list(params: &[(String, String, String)]) -> String {
    params
        .iter()
        .map(|(shown, label, why)| format!("{shown} (label {label}: {why})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn agree(params: &[(String, String, String)]) -> String {
    params
        .iter()
        .map(|(shown, _, _)| {
            let name = shown.split('=').next().unwrap_or(shown);
            format!("--allow-jail-param {name}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Blame for ParamsError {
    /// Always the user's: the image they chose, or their consent.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// What the jail gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agreed {
    /// The parameters to set, as jail(8) takes them.
    pub params: Vec<(String, String)>,
    /// Notes on the ones left out or agreed to, for the jail.conf entry.
    pub comments: Vec<String>,
}

/// What the jail gets: the parameters to set and comments on the ones
/// left out. Refuses an invalid parameter, and any that needs consent
/// and is not in `allowed` (all of them named at once).
pub fn agreed(
    image: &str,
    params: &[ImageParam],
    allowed: &[String],
) -> Result<Agreed, ParamsError> {
    let mut set = Vec::new();
    let mut comments = Vec::new();
    let mut missing = Vec::new();
    for p in params {
        match &p.judgement {
            Judgement::Invalid(why) => {
                return Err(ParamsError::Invalid {
                    image: image.to_string(),
                    why: why.clone(),
                })
            }
            Judgement::Owned => {
                comments.push(format!(
                    "the image asks for {} (label {}); jbuild create sets it",
                    p.shown(),
                    p.label.label
                ));
                continue;
            }
            Judgement::NeedsConsent(why) if !allowed.iter().any(|a| a == p.name()) => {
                missing.push((p.shown(), p.label.label.clone(), why.to_string()));
                continue;
            }
            Judgement::NeedsConsent(_) => {
                comments.push(format!("{}: allowed with --allow-jail-param", p.shown()))
            }
            Judgement::Fine => {}
        }
        if p.label.label.starts_with(FSTAB_LABEL) {
            // Agreed to; the line goes to the jail's fstab file.
            continue;
        }
        set.push((p.label.param.clone(), p.label.value.clone()));
    }
    if !missing.is_empty() {
        return Err(ParamsError::NeedsConsent {
            image: image.to_string(),
            params: missing,
        });
    }
    Ok(Agreed {
        params: set,
        comments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jailparam::judge::read;
    use std::collections::BTreeMap;

    fn params(pairs: &[(&str, &str)]) -> Vec<ImageParam> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        read(&m)
    }

    #[test]
    fn risky_parameters_need_consent_and_are_named_together() {
        let p = params(&[
            ("org.freebsd.jail.allow.mlock", "required"),
            ("org.freebsd.jail.allow.raw_sockets", "true"),
            ("org.freebsd.jail.exec.prestart", "rm -rf /"),
            ("org.freebsd.jail.securelevel", "3"),
            ("org.jbuild.jail.allow.set_hostname", ""),
        ]);
        let err = agreed("img", &p, &[]).unwrap_err().to_string();
        for want in [
            "allow.mlock (label org.freebsd.jail.allow.mlock",
            "allow.raw_sockets",
            "exec.prestart=rm -rf /",
            "--allow-jail-param allow.mlock --allow-jail-param allow.raw_sockets --allow-jail-param exec.prestart",
        ] {
            assert!(err.contains(want), "no `{want}` in {err}");
        }
        assert!(!err.contains("securelevel"), "{err}");
        let allowed: Vec<String> = ["allow.mlock", "allow.raw_sockets", "exec.prestart"]
            .map(String::from)
            .to_vec();
        let set = agreed("img", &p, &allowed).unwrap().params;
        let names: Vec<(&str, &str)> = set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            names,
            [
                ("allow.mlock", ""),
                ("allow.raw_sockets", ""),
                ("allow.set_hostname", ""),
                ("exec.prestart", "rm -rf /"),
                ("securelevel", "3"),
            ]
        );
    }

    #[test]
    fn identity_is_jbuilds_and_bad_labels_are_refused() {
        let p = params(&[
            ("org.freebsd.jail.path", "/"),
            ("org.freebsd.jail.osrelease", "14.3-RELEASE"),
        ]);
        let Agreed {
            params: set,
            comments,
        } = agreed("img", &p, &[]).unwrap();
        assert_eq!(set, [("osrelease".to_string(), "14.3-RELEASE".to_string())]);
        assert!(comments[0].contains("path=/"), "{comments:?}");
        for (k, v, want) in [
            (
                "org.freebsd.jail.x; exec.prestart",
                "1",
                "not a jail parameter name",
            ),
            (
                "org.freebsd.jail.Allow.mount",
                "1",
                "not a jail parameter name",
            ),
            ("org.freebsd.jail.osrelease", "a\nb", "control characters"),
            (
                "org.freebsd.jail.allow.mlock",
                "sometimes",
                "a permission is on",
            ),
        ] {
            let err = agreed("img", &params(&[(k, v)]), &[]).unwrap_err();
            assert!(err.to_string().contains(want), "{k}: {err}");
        }
    }
}
