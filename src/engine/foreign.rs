//! What may be built for an architecture this host is not.
//!
//! Native instructions (COPY, SYSRC, SERVICE, LINE_IN_FILE, RENDER) edit
//! files and run nothing, so a recipe made of them builds for any
//! architecture. RUN and PKG start a process inside the root, which only
//! works when the root's architecture is the host's; jbuild does not
//! emulate. Such a step for another architecture is refused after
//! planning, before any step runs, naming the step and the platform.

use super::error::BuildError;
use crate::image::Platform;
use crate::jailfile::Op;
use crate::plan::{Plan, StepKind};

/// Whether a process built for `platform` runs on a host of architecture
/// `host_arch` (as [`crate::config::host_architecture`] names it). The OS
/// does not count: the Linux executor runs FreeBSD-labelled roots of the
/// host's architecture in CI, and FreeBSD runs its own.
pub fn runs_here(platform: &Platform, host_arch: &str) -> bool {
    Platform::parse(&format!("{}/{host_arch}", platform.os))
        .is_ok_and(|host| host.architecture == platform.architecture)
}

/// Refuses the plan when a RUN or PKG step of a stage it needs is for an
/// architecture this host cannot run: the first such step, located, with
/// its platform.
pub fn check_runnable(plan: &Plan, host_arch: &str) -> Result<(), BuildError> {
    for stage in &plan.stages {
        let platform = &stage.state.platform;
        if runs_here(platform, host_arch) {
            continue;
        }
        for ps in &stage.steps {
            if let (StepKind::Layer { .. }, Op::Run { .. } | Op::Pkg { .. }) =
                (&ps.kind, &ps.step.op)
            {
                return Err(BuildError::Foreign {
                    platform: platform.clone(),
                    host: host_arch.to_string(),
                }
                .located(&ps.step.location)
                .with_step(&ps.step.text));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::jailfile::{self, CopySource};
    use crate::plan::{self, BaseImage, InputError, PlanInputs, PlanOptions};
    use std::path::Path;

    /// Answers for recipes `FROM scratch`: context sources hash to a constant.
    struct Scratch;

    impl PlanInputs for Scratch {
        fn image(&self, r: &str, _: &Platform) -> Result<BaseImage, InputError> {
            Err(InputError::user(format!("no image {r} here")))
        }
        fn context_sources(&self, _: &[CopySource]) -> Result<Digest, InputError> {
            Ok(Digest::of(b"context"))
        }
        fn release(&self, _: &str, _: &Platform) -> Result<Vec<(String, Digest)>, InputError> {
            Err(InputError::user("no releases here"))
        }
        fn pkg_repositories(&self, _: Option<&str>) -> Result<String, InputError> {
            Ok(String::new())
        }
    }

    fn plan_for(text: &str, platform: &str) -> Plan {
        let build = jailfile::load_str(Path::new("Jailfile"), text, &Default::default()).unwrap();
        let opts = PlanOptions {
            platform: Some(Platform::parse(platform).unwrap()),
            no_cache_nonce: None,
            target: None,
        };
        plan::plan(&build, &Scratch, &opts).unwrap()
    }

    #[test]
    fn only_the_architecture_decides() {
        let p = |s| Platform::parse(s).unwrap();
        assert!(runs_here(&p("freebsd/amd64"), "amd64"));
        assert!(runs_here(&p("linux/amd64"), "amd64"));
        assert!(runs_here(&p("freebsd/x86_64"), "amd64"));
        assert!(runs_here(&p("freebsd/arm64/v8"), "arm64"));
        assert!(!runs_here(&p("freebsd/arm64"), "amd64"));
        assert!(!runs_here(&p("freebsd/riscv64"), "arm64"));
    }

    #[test]
    fn native_steps_build_anywhere_and_run_steps_only_natively() {
        let native = "FROM scratch\nCOPY a /a\nSYSRC sshd_enable=YES\nLABEL x=y\n";
        check_runnable(&plan_for(native, "freebsd/arm64"), "amd64").unwrap();
        check_runnable(&plan_for(native, "freebsd/riscv64"), "amd64").unwrap();

        let run = "FROM scratch\nCOPY a /a\nRUN echo hi\n";
        check_runnable(&plan_for(run, "freebsd/amd64"), "amd64").unwrap();
        let err = check_runnable(&plan_for(run, "freebsd/arm64"), "amd64").unwrap_err();
        assert!(err.is_user_error());
        let text = err.to_string();
        assert!(text.contains("Jailfile:3"), "{text}");
        assert!(text.contains("RUN echo hi"), "{text}");
        assert!(
            text.contains("freebsd/arm64") && text.contains("amd64 host"),
            "{text}"
        );

        let pkg = "FROM scratch\nPKG nginx\n";
        let err = check_runnable(&plan_for(pkg, "freebsd/arm64"), "amd64").unwrap_err();
        assert!(err.to_string().contains("Jailfile:2"), "{err}");
    }

    #[test]
    fn a_stage_the_target_does_not_need_is_not_checked() {
        let text = "FROM scratch AS unused\nRUN echo hi\nFROM scratch\nCOPY a /a\n";
        check_runnable(&plan_for(text, "freebsd/arm64"), "amd64").unwrap();
    }
}
