//! pkg.conf's `REPOS_DIR` through the `jbuild` binary (dir backend): the
//! image's `/usr/local/etc/pkg.conf` names the directories whose `*.conf`
//! files name the repositories, in place of `/etc/pkg` and
//! `/usr/local/etc/pkg/repos`. A repository file in such a directory is
//! the one installed from, and the PKG step's key follows its catalogue
//! (the key and the install read the same files); `--pkg-repos DIR`
//! still stands for `/usr/local/etc/pkg/repos` where the list names it.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::common::{jbuild, run};
use crate::support::pkgrepo::image::freebsd_tree;
use crate::support::pkgrepo::Key;

use super::repos_key::{local_conf as conf, repo};
use super::{installed, serve};

/// Builds `ctx` as `tag` (with `--pkg-repos` for each of `extra`): steps
/// run, cached, and the packages installed.
fn build(root: &Path, ctx: &Path, tag: &str, extra: &[&Path]) -> (u64, u64, Vec<String>) {
    let mut cmd = jbuild(root);
    cmd.args(["--json", "build", "--platform", "freebsd/amd64", "-t", tag]);
    for e in extra {
        cmd.arg("--pkg-repos").arg(e);
    }
    let out = run(cmd.arg(ctx));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let result = events.iter().find(|e| e["event"] == "result").unwrap();
    (
        result["steps_run"].as_u64().unwrap(),
        result["steps_cached"].as_u64().unwrap(),
        installed(&events),
    )
}

/// A context whose Jailfile copies `pkg_conf` to the image's pkg.conf and
/// a repository file naming `other` to `/opt/repos`, then installs `app`.
fn with_pkg_conf(dir: &Path, pkg_conf: &str, port: u16) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(
        dir.join("Jailfile"),
        "FROM base:1\nCOPY pkg.conf /usr/local/etc/pkg.conf\n\
         COPY other.conf /opt/repos/other.conf\nPKG --no-bootstrap app\n",
    )
    .unwrap();
    fs::write(dir.join("pkg.conf"), pkg_conf).unwrap();
    fs::write(dir.join("other.conf"), conf(port, "other")).unwrap();
    dir.to_path_buf()
}

#[test]
fn pkg_reads_the_repositories_of_the_directories_repos_dir_names() {
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    let key = Key::new(t, "repo");
    let www = t.join("www");
    for (name, version) in [("current", "1"), ("other", "2"), ("flagged", "4")] {
        repo(&www, name, &key, version, version);
    }
    let server = serve(www.clone());
    let port = server.port;
    let root = t.join("root");
    // The base: /etc/pkg names a repository nobody serves, turned off by
    // /usr/local/etc/pkg/repos/local.conf, which names `current`.
    let base = t.join("base");
    let tree = base.join("tree");
    let unused = format!("http://127.0.0.1:{port}/unused");
    freebsd_tree(&tree, "amd64", &unused, &key);
    let repos = tree.join("usr/local/etc/pkg/repos");
    fs::create_dir_all(&repos).unwrap();
    fs::write(repos.join("local.conf"), conf(port, "current")).unwrap();
    fs::write(base.join("Jailfile"), "FROM scratch\nCOPY tree/ /\n").unwrap();
    build(&root, &base, "base:1", &[]);

    // REPOS_DIR names /etc/pkg and /opt/repos, whose file names `other`:
    // app-2 is installed (pkg's default directories would give app-1).
    let list = "REPOS_DIR: [ \"/etc/pkg/\", \"/opt/repos/\" ]\n";
    let app = with_pkg_conf(&t.join("app"), list, port);
    let app_2 = vec!["app-2".to_string()];
    assert_eq!(build(&root, &app, "app:1", &[]), (3, 0, app_2));
    assert_eq!(build(&root, &app, "app:1", &[]), (0, 3, vec![]));
    // `other` serves another catalogue: the PKG step's key follows it.
    repo(&www, "other", &key, "3", "3");
    let app_3 = vec!["app-3".to_string()];
    assert_eq!(build(&root, &app, "app:1", &[]), (1, 2, app_3));

    // REPOS_DIR naming /usr/local/etc/pkg/repos after /opt/repos: the
    // base's local.conf names `current` last (app-1); `--pkg-repos DIR`
    // stands in its place (app-4 from `flagged`).
    let list = "REPOS_DIR = [ \"/opt/repos\", \"/usr/local/etc/pkg/repos\" ];\n";
    let listed = with_pkg_conf(&t.join("listed"), list, port);
    let app_1 = vec!["app-1".to_string()];
    assert_eq!(build(&root, &listed, "listed:1", &[]), (3, 0, app_1));
    let flag = t.join("flag");
    fs::create_dir_all(&flag).unwrap();
    fs::write(flag.join("flagged.conf"), conf(port, "flagged")).unwrap();
    let app_4 = vec!["app-4".to_string()];
    assert_eq!(build(&root, &listed, "listed:1", &[&flag]).2, app_4);
}
