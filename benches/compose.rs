//! Compose benchmark over generated deployments (run: `cargo bench --bench compose`).
//!
//! For each size (default 1,000 and 10,000 groups; `CLAWMD_BENCH_GROUPS=100,1000` to change):
//! first `compose --all`, a no-op re-compose, a re-compose after one group's config changed
//! (in process, through the library), and the wall time of single-group `clawmd compose` *process*
//! runs, start to exit (no-op, the runner's per-spawn case). Prints a Markdown table for
//! docs/performance.md. Timings are medians of several runs; the machine is whatever runs it.

#![allow(clippy::disallowed_methods)] // tests build their trees with std::fs (clippy.toml)

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use clawmd::compose::{ComposeOptions, compose};
use clawmd::deployment::Selection;
use clawmd::{Delivery, Layout};

const SKILLS: usize = 8;

fn generate(root: &Path, groups: usize) {
    std::fs::create_dir_all(root.join("container/skills")).unwrap();
    std::fs::write(
        root.join("container/CLAUDE.md"),
        "# Shared base\n".repeat(50),
    )
    .unwrap();
    for s in 0..SKILLS {
        let dir = root.join(format!("container/skills/skill-{s}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SKILL.md"), "skill\n").unwrap();
        if s.is_multiple_of(2) {
            std::fs::write(
                dir.join("instructions.md"),
                format!("Skill {s} guidance.\n"),
            )
            .unwrap();
        }
    }
    for g in 0..groups {
        let dir = root.join(format!("groups/group-{g:05}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("container.json"), config(g, "Read only.")).unwrap();
        std::fs::write(dir.join("CLAUDE.local.md"), format!("Group {g} notes.\n")).unwrap();
    }
}

fn config(g: usize, instructions: &str) -> String {
    let skills = if g.is_multiple_of(3) {
        "\"all\"".to_owned()
    } else {
        format!("[\"skill-0\", \"skill-{}\"]", g % SKILLS)
    };
    format!(
        r#"{{"skills": {skills}, "mcpServers": {{"db": {{"command": "db", "instructions": "{instructions}"}}, "mail": {{"command": "m"}}}}}}"#
    )
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let sizes: Vec<usize> = std::env::var("CLAWMD_BENCH_GROUPS")
        .unwrap_or_else(|_| "1000,10000".to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let binary = env!("CARGO_BIN_EXE_clawmd");
    println!(
        "| groups | delivery | first compose --all | no-op compose --all | per group (no-op) | after one change | one-group process, no-op |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for &groups in &sizes {
        for delivery in [Delivery::Inline, Delivery::Link, Delivery::Copy] {
            let temp = tempfile::tempdir().unwrap();
            generate(temp.path(), groups);
            let layout = Layout::under_root(temp.path());
            let options = ComposeOptions {
                settings: clawmd::delivery::DeliverySettings::with_delivery(delivery),
                ..ComposeOptions::default()
            };
            let (first, report) = time(|| compose(&layout, &Selection::All, &options).unwrap());
            assert!(report.ok && report.summary.changed == groups);

            let noop = median(
                (0..5)
                    .map(|_| {
                        let (elapsed, report) =
                            time(|| compose(&layout, &Selection::All, &options).unwrap());
                        assert_eq!(report.summary.unchanged, groups);
                        elapsed
                    })
                    .collect(),
            );

            let changed = median(
                (0..5)
                    .map(|i| {
                        let path = temp.path().join("groups/group-00001/container.json");
                        std::fs::write(path, config(1, &format!("Version {i}."))).unwrap();
                        let (elapsed, report) =
                            time(|| compose(&layout, &Selection::All, &options).unwrap());
                        assert_eq!(report.summary.changed, 1);
                        elapsed
                    })
                    .collect(),
            );

            let process = median(
                (0..30)
                    .map(|_| {
                        let (elapsed, status) = time(|| {
                            Command::new(binary)
                                .args([
                                    "compose",
                                    "group-00002",
                                    "--delivery",
                                    &delivery.to_string(),
                                ])
                                .arg("--root")
                                .arg(temp.path())
                                .stdout(std::process::Stdio::null())
                                .status()
                                .unwrap()
                        });
                        assert!(status.success());
                        elapsed
                    })
                    .collect(),
            );
            let per_group = noop / groups as u32;
            println!(
                "| {groups} | {delivery} | {} | {} | {:.1} µs | {} | {} |",
                ms(first),
                ms(noop),
                per_group.as_secs_f64() * 1e6,
                ms(changed),
                ms(process)
            );
        }
    }
}
