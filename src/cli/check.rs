//! `jbuild check [--repair]`: is everything stored sound; what is left over.
//! Exit 0: no damage (reclaimable and pending things may be listed);
//! 1: damage found; 2: the check itself failed.

use anyhow::anyhow;
use clap::Args;

use super::{CmdResult, Ctx, Failure};
use jbuild::check::{self, Inputs, Repaired, Report};
use jbuild::store::{Store, StoreError, StoreLock};

#[derive(Args, Debug)]
#[command(
    after_help = "Exit status: 0 nothing is damaged (reclaimable things, and pending ones running \
                        jbuild processes may be adding, may be listed), \
                        1 damage found (each finding says what to do), 2 the check itself failed.\n\
                        Findings and repair: docs/check.md"
)]
pub struct CheckArgs {
    /// Remove leftovers of interrupted work and content no image uses,
    /// delete corrupt blob files (never untags an image); then check again.
    #[arg(long)]
    repair: bool,
    /// Also diff every layer built here against its parent again and
    /// compare its diff ID with the one recorded (reads every snapshot).
    #[arg(long)]
    deep: bool,
}

pub fn run(ctx: &Ctx, args: CheckArgs) -> CmdResult {
    // A plain check never writes (a read-only root is fine): its
    // snapshots are opened only to be looked at.
    let sn = if args.repair {
        ctx.snapshotter()?
    } else {
        ctx.inspector()?
    };
    let store_dir = ctx.paths.store();
    // The store lock, exclusively, for the whole repair: no pull or import
    // adds content meanwhile. Held by someone else: leave their work alone.
    let lock = if args.repair && store_dir.is_dir() {
        match StoreLock::try_exclusive(&Store::open_unchecked(&store_dir)) {
            Ok(lock) => lock,
            // `.jbuild/` is a symlink: reported, and what the store lock
            // guards is left alone.
            Err(StoreError::Place(e)) if e.is_stray() => None,
            Err(e) => return Err(Failure::internal(e)),
        }
    } else {
        None
    };
    let inputs = Inputs {
        paths: &ctx.paths,
        snapshotter: Some(sn.as_ref()),
        store_lock_held: lock.is_some(),
        deep: args.deep,
    };
    let (report, repaired) = if args.repair {
        check::check_and_repair(&inputs, lock.as_ref())
    } else {
        check::check(&inputs).map(|report| (report, Vec::new()))
    }?;
    drop(lock);
    print(ctx, &report, &repaired)?;
    if report.is_damaged() {
        let n = report.damaged().count();
        return Err(Failure::user(anyhow!(
            "the store is damaged: {n} problem{} found (each says what to do)",
            if n == 1 { "" } else { "s" }
        )));
    }
    Ok(())
}

fn print(ctx: &Ctx, report: &Report, repaired: &[Repaired]) -> CmdResult {
    if ctx.json {
        let mut v = report.to_json();
        v["repaired"] = serde_json::json!(repaired);
        outln!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(Failure::internal)?
        );
        return Ok(());
    }
    for r in repaired {
        outln!("repaired: {r}");
    }
    for f in report.damaged() {
        outln!("{}", f.to_text());
    }
    if !ctx.quiet {
        for f in report.reclaimable().chain(report.pending()) {
            outln!("{}", f.to_text());
        }
        for n in &report.notes {
            outln!("note: {n}");
        }
    }
    outln!("{}", report.summary_line());
    Ok(())
}
