//! Where a template lies on the host never reaches its image: the
//! Jailfile a template is translated to (kept whole in the
//! `org.jbuild.jailfile` label) names the template by its place in the
//! build context, so the same templates checked out in two directories
//! build to the same image digest, and a CI workspace path is not
//! published with the image.

use std::fs;
use std::path::Path;

use super::{busybox_base, templates};
use crate::support::common::{copy_tree, jbuild, ok};

/// Builds `templates/wordpress` (which INCLUDEs `../php`, which INCLUDEs
/// `../webbase`: the context is `templates`) and returns its digest and
/// its Jailfile label.
fn build(state: &Path, templates: &Path, tag: &str, iid: &Path) -> (String, String) {
    ok(jbuild(state)
        .args(["build", "-q", "-t", tag, "--from", "bb:base", "--iidfile"])
        .arg(iid)
        .arg(templates.join("wordpress")));
    let digest = fs::read_to_string(iid).unwrap();
    let inspected: serde_json::Value =
        serde_json::from_str(&ok(jbuild(state).args(["inspect", tag]))).unwrap();
    let label = inspected
        .pointer("/config/config/Labels/org.jbuild.jailfile")
        .and_then(|v| v.as_str())
        .unwrap_or_else(|| panic!("no org.jbuild.jailfile label in {inspected}"))
        .to_string();
    (digest, label)
}

#[test]
fn one_template_in_two_directories_builds_to_one_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let state = busybox_base(tmp.path());
    let a = tmp.path().join("checkout-a/some/where/templates");
    let b = tmp.path().join("ci-workspace-b/templates");
    copy_tree(&templates(), &a);
    copy_tree(&templates(), &b);

    let (da, la) = build(&state, &a, "wp:a", &tmp.path().join("a.id"));
    let (db, lb) = build(&state, &b, "wp:b", &tmp.path().join("b.id"));
    assert_eq!(la, lb, "the Jailfile label differs between the two places");
    assert_eq!(da, db, "the image digest differs between the two places");
    let tmp_dir = tmp.path().to_string_lossy();
    for word in [tmp_dir.as_ref(), "checkout-a", "ci-workspace-b"] {
        assert!(!la.contains(word), "the label names `{word}`:\n{la}");
    }
    // It still says where in the context the template is.
    assert!(
        la.lines()
            .next()
            .unwrap()
            .contains("./wordpress/Bastillefile"),
        "{la}"
    );
}
