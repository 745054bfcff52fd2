//! Budgets a recipe is held to, each through the binary under GNU time:
//! expansion (one value at most 4 MiB, all of one recipe's substitution
//! 16 MiB), instructions (10,000 in a recipe, 1 MiB each), and the config a
//! build writes (the 4 MiB every reader enforces). Before, a 1.6 KiB
//! Jailfile doubling an ARG took the machine's memory, and 400,000 ENV lines
//! stored a config that `check` then called damage.
//!
//! Every run is capped at 4 GiB of address space, so the code before these
//! budgets fails the test instead of taking the machine down with it.

use super::{text, Home};
use crate::support::limits::{run_measured_capped, Measured};
use crate::support::registry::{run_bounded, LIMIT};

use std::fs;
use std::time::Duration;

/// Peak RSS a refused recipe may reach: the debug binary starts near
/// 28 MiB (the figure of docs/security.md, as for refused documents).
const MAX_RSS_KIB: i64 = 64 << 10;
/// Address space any run here may take.
const CAP: u64 = 4 << 30;
/// How long a refused recipe may take (debug build; they take about 1 s).
const QUICK: Duration = Duration::from_secs(60);

/// `jbuild build -q -t big:1 ctx`, measured (quiet: the error alone is
/// on stderr, not the steps' progress lines); its figures are printed
/// under `what` (`--nocapture` shows them).
fn build(h: &Home, what: &str) -> Measured {
    let m = run_measured_capped(
        h.jbuild().args(["build", "-q", "-t", "big:1"]).arg(h.ctx()),
        b"",
        QUICK,
        CAP,
    );
    eprintln!(
        "{what}: exit {:?}, {:.1?}, peak RSS {} KiB",
        m.output.status.code(),
        m.elapsed,
        m.max_rss_kib
    );
    m
}

/// Exit 1 with each of `says`, within the RSS bound (when `bounded`), no
/// image named, and `check` finding the store sound.
fn refused(h: &Home, m: &Measured, says: &[&str], bounded: bool) {
    assert_eq!(m.output.status.code(), Some(1), "{}", m.text());
    let err = m.stderr();
    for s in says {
        assert!(err.contains(s), "`{s}` not in:\n{}", m.text());
    }
    assert!(
        err.len() < 4096,
        "{} bytes of error:\n{}",
        err.len(),
        m.text()
    );
    if bounded {
        assert!(
            m.max_rss_kib <= MAX_RSS_KIB,
            "peak RSS {} KiB:\n{}",
            m.max_rss_kib,
            m.text()
        );
    }
    let images = run_bounded(h.jbuild().arg("images"), LIMIT);
    assert!(
        !text(&images.stdout).contains("big"),
        "an image was named:\n{}",
        text(&images.stdout)
    );
    let check = run_bounded(h.jbuild().arg("check"), LIMIT);
    assert!(
        check.status.success(),
        "check after the refused build:\n{}{}",
        text(&check.stdout),
        text(&check.stderr)
    );
}

/// `ARG A0` of `seed` bytes, then `ARG A<i>=${A<i-1>}${A<i-1>}` for
/// `levels` levels: the value doubles each line.
fn doubling(seed: usize, levels: usize) -> String {
    let mut s = format!("ARG A0={}\n", "x".repeat(seed));
    for i in 1..=levels {
        s.push_str(&format!("ARG A{i}=${{A{}}}${{A{}}}\n", i - 1, i - 1));
    }
    s
}

#[test]
fn an_arg_doubled_thirty_times_fails_fast_in_bounded_memory() {
    let recipe = format!(
        "{}FROM scratch\nARG A30\nENV BIG=${{A30}}\n",
        doubling(1000, 30)
    );
    assert!(recipe.len() < 2048, "{} bytes", recipe.len());
    let h = Home::new(&recipe);
    let m = build(&h, "doubling");
    // 1000 bytes doubled 12 times is 4,096,000 bytes; the 13th passes 4 MiB.
    refused(
        &h,
        &m,
        &["a value of more than 4 MiB", "Jailfile:14:"],
        true,
    );
}

#[test]
fn a_large_value_used_over_and_over_meets_the_recipe_budget() {
    // A 1 MiB ARG, within the value limit, in twenty LABELs: each copy
    // counts (history, the label, the ARG the step records).
    let mut recipe = format!("{}FROM scratch\nARG A10\n", doubling(1000, 10));
    for i in 0..20 {
        recipe.push_str(&format!("LABEL l{i}=${{A10}}\n"));
    }
    let h = Home::new(&recipe);
    let m = build(&h, "recipe budget");
    refused(&h, &m, &["more than 16 MiB of values in this recipe"], true);
}

#[test]
fn a_config_over_4_mib_is_refused_before_anything_is_named() {
    // Three ENV values of 1,024,000 bytes: within every recipe budget, but
    // the config would hold each twice (Env, history): about 6 MB.
    let recipe = format!(
        "{}FROM scratch\nARG A10\nENV E1=${{A10}}\nENV E2=${{A10}}\nENV E3=${{A10}}\n",
        doubling(1000, 10)
    );
    let h = Home::new(&recipe);
    let m = build(&h, "config");
    refused(
        &h,
        &m,
        &[
            "the image config this build makes is",
            "more than the 4194304 bytes",
            "is at least",
            "3 ENV variables hold",
        ],
        true,
    );

    // The Jailfile itself is kept in the config (a label): 3 MiB of
    // comments full of quotes, which JSON doubles, is too much.
    let comments = format!("#{}\n", "\"".repeat(99)).repeat(30_000);
    fs::write(
        h.ctx().join("Jailfile"),
        format!("FROM scratch\n{comments}"),
    )
    .unwrap();
    let m = build(&h, "jailfile label");
    refused(
        &h,
        &m,
        &["the Jailfile, kept in the `org.jbuild.jailfile` label"],
        true,
    );
}

/// Four ENV values of 1 MB, refused as the config they would make is
/// too large, within the same bound: the plan shares each resolved step
/// (its text, its ARGs, its values) instead of copying it, and records a
/// step's text once for its history. Before, the plan held each value
/// eleven times over at the peak (heaptrack: the step copied whole into
/// the plan, its text copied twice more), and this recipe peaked near
/// 80 MB (debug build).
#[test]
fn four_env_values_of_a_megabyte_are_refused_well_within_the_bound() {
    let recipe = format!(
        "{}FROM scratch\nARG A10\nENV E1=${{A10}}\nENV E2=${{A10}}\nENV E3=${{A10}}\nENV E4=${{A10}}\n",
        doubling(1000, 10)
    );
    let h = Home::new(&recipe);
    let m = build(&h, "four ENV");
    refused(
        &h,
        &m,
        &[
            "the image config this build makes is",
            "4 ENV variables hold",
        ],
        true,
    );
}

#[test]
fn four_hundred_thousand_env_lines_are_refused_at_once() {
    let recipe = format!("FROM scratch\n{}", "ENV A=1\n".repeat(400_000));
    let h = Home::new(&recipe);
    let m = build(&h, "400,000 ENV");
    refused(
        &h,
        &m,
        &["more than 10000 instructions", "Jailfile:10001:"],
        true,
    );
}

#[test]
fn one_instruction_of_megabytes_is_refused_and_a_long_line_is_shown_in_part() {
    // 3.3 MB on one line: refused before it is held sixteen times over.
    let h = Home::new(&format!(
        "FROM scratch\nLABEL a={}\n",
        "x".repeat(3_300_000)
    ));
    let m = build(&h, "long instruction");
    refused(&h, &m, &["more than 1 MiB long", "Jailfile:2:1"], true);

    // An error far along a long line: the line is shown around the
    // column, not whole (and rendering it does not panic).
    fs::write(
        h.ctx().join("Jailfile"),
        format!("FROM scratch\nLABEL a={} \"oops\n", "x".repeat(70_000)),
    )
    .unwrap();
    let m = build(&h, "long line");
    refused(
        &h,
        &m,
        &["unterminated quote", "Jailfile:2:70010", "…"],
        true,
    );
}
