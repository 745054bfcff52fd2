//! `jbuild system df`: the state root's disk use by kind, and what
//! `prune` would free.

use clap::{Args, Subcommand};

use super::{CmdResult, Ctx, Failure};
use jbuild::image::usage;
use jbuild::report::plain::bytes;

#[derive(Args, Debug)]
pub struct SystemArgs {
    #[command(subcommand)]
    command: SystemCmd,
}

#[derive(Subcommand, Debug)]
enum SystemCmd {
    /// Show the disk space images, layers, snapshots, the build cache, the
    /// package and release caches and cache mounts take, and how much of
    /// it `prune` (or `prune --cache`) frees; with --json, as a list.
    Df,
}

pub fn run(ctx: &Ctx, args: SystemArgs) -> CmdResult {
    match args.command {
        SystemCmd::Df => df(ctx),
    }
}

fn df(ctx: &Ctx) -> CmdResult {
    let store = ctx.store()?;
    let snapshotter = ctx.snapshotter()?;
    let rows = usage::usage(&store, snapshotter.as_ref(), &ctx.paths).map_err(Failure::from)?;
    if ctx.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(Failure::internal)?
        );
        return Ok(());
    }
    let shown = |n: Option<u64>| n.map_or_else(|| "-".to_string(), bytes);
    let mut lines = vec![[
        "TYPE".to_string(),
        "TOTAL".into(),
        "SIZE".into(),
        "RECLAIMABLE".into(),
        "FREED BY".into(),
    ]];
    for r in &rows {
        lines.push([
            r.kind.to_string(),
            r.total.to_string(),
            shown(r.size),
            shown(r.reclaimable),
            r.freed_by.unwrap_or("-").to_string(),
        ]);
    }
    let width = |i: usize| {
        lines
            .iter()
            .map(|l| l[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..4).map(width).collect();
    for l in &lines {
        outln!(
            "{:<w0$}   {:>w1$}   {:>w2$}   {:>w3$}   {}",
            l[0],
            l[1],
            l[2],
            l[3],
            l[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
    }
    Ok(())
}
