use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use filetime::FileTime;
use jbuild::digest::Digest;
use jbuild::engine::native::{sources_digest, Ignore};
use jbuild::jailfile::CopySource;

use super::{chmod, Scratch};

fn tree(base: &Path) {
    Scratch::write(base, "a.txt", "A");
    Scratch::write(base, "src/main.c", "int main() {}\n");
    Scratch::write(base, "src/lib/x.h", "#pragma once\n");
    symlink("src/main.c", base.join("link")).unwrap();
}

fn digest(base: &Path, sources: &[&str]) -> Digest {
    let ignore = Ignore::load(base).unwrap();
    let sources: Vec<_> = sources
        .iter()
        .map(|s| CopySource::Path(s.to_string()))
        .collect();
    sources_digest(base, &sources, ignore.as_ref()).unwrap()
}

#[test]
fn same_tree_same_digest_anywhere() {
    let (one, two) = (Scratch::create(), Scratch::create());
    tree(&one.ctx);
    tree(&two.ctx);
    assert_eq!(digest(&one.ctx, &["."]), digest(&two.ctx, &["."]));
    assert_eq!(
        digest(&one.ctx, &["src", "*.txt"]),
        digest(&two.ctx, &["src", "*.txt"])
    );
    assert_ne!(digest(&one.ctx, &["src"]), digest(&one.ctx, &["."]));
}

#[test]
fn content_mode_name_and_link_changes_change_it() {
    let s = Scratch::create();
    tree(&s.ctx);
    let base = digest(&s.ctx, &["."]);
    let mut seen = vec![base.clone()];
    let mut changed = |what: &str| {
        let d = digest(&s.ctx, &["."]);
        assert!(!seen.contains(&d), "{what} did not change the digest");
        seen.push(d);
    };
    fs::write(s.ctx.join("src/main.c"), "int main() { return 1; }\n").unwrap();
    changed("content");
    chmod(&s.ctx.join("a.txt"), 0o600);
    changed("mode");
    fs::rename(s.ctx.join("a.txt"), s.ctx.join("b.txt")).unwrap();
    changed("name");
    fs::remove_file(s.ctx.join("link")).unwrap();
    symlink("src/lib/x.h", s.ctx.join("link")).unwrap();
    changed("symlink target");
    fs::create_dir(s.ctx.join("empty")).unwrap();
    changed("new empty directory");
}

#[test]
fn mtime_and_ignored_files_do_not_change_it() {
    let s = Scratch::create();
    tree(&s.ctx);
    Scratch::write(&s.ctx, ".jailignore", "*.log\ntmp/\n");
    let before = digest(&s.ctx, &["."]);
    filetime::set_file_mtime(s.ctx.join("a.txt"), FileTime::from_unix_time(12345, 0)).unwrap();
    filetime::set_file_mtime(s.ctx.join("src"), FileTime::from_unix_time(12345, 0)).unwrap();
    Scratch::write(&s.ctx, "build.log", "noise");
    Scratch::write(&s.ctx, "tmp/cache/blob", "noise");
    assert_eq!(digest(&s.ctx, &["."]), before);
    // Rewriting a file with the same content (as a fresh checkout does).
    fs::remove_file(s.ctx.join("src/main.c")).unwrap();
    Scratch::write(&s.ctx, "src/main.c", "int main() {}\n");
    assert_eq!(digest(&s.ctx, &["."]), before);
}

#[test]
fn digest_errors_like_copy() {
    let s = Scratch::create();
    tree(&s.ctx);
    let sources = [CopySource::Path("missing/*".into())];
    let err = sources_digest(&s.ctx, &sources, None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "COPY source `missing/*` matches nothing in the build context"
    );
}

/// Bytes this thread has read through `read(2)` and its kin so far
/// (`rchar` of /proc/thread-self/io): the hashing reads file contents on
/// the calling thread.
fn bytes_read_by_this_thread() -> u64 {
    let io = fs::read_to_string("/proc/thread-self/io")
        .expect("/proc/thread-self/io (Linux procfs) counts the bytes a thread reads");
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rchar in /proc/thread-self/io:\n{io}"))
}

#[test]
fn cached_rebuild_reads_no_file_twice() {
    // 20 COPY steps over a context of 500 small files: the content is read
    // once, then each file's hash comes from the memo (a stat, no read).
    let s = Scratch::create();
    let mut content = 0;
    for i in 0..500 {
        Scratch::write(&s.ctx, &format!("d{}/f{i}.txt", i % 10), &"x".repeat(i));
        content += i as u64;
    }
    let before = bytes_read_by_this_thread();
    let first = digest(&s.ctx, &["."]);
    let first_read = bytes_read_by_this_thread() - before;
    assert!(
        first_read >= content,
        "the first digest read {first_read} bytes of a {content}-byte context"
    );
    let before = bytes_read_by_this_thread();
    for _ in 0..20 {
        assert_eq!(digest(&s.ctx, &["."]), first);
    }
    let again = bytes_read_by_this_thread() - before;
    eprintln!("first digest read {first_read} bytes; 20 more read {again}");
    assert!(
        again < content,
        "20 cached digests read {again} bytes: the {content} bytes of content again"
    );
}
