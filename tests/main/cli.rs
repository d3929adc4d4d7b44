//! The command line itself: its usage errors, help texts and manual pages, as a newcomer meets
//! them (issue 42).

use crate::support::run_clawmd;

/// `compose` with no group names its two choices: groups, or `--all` (it never composes every
/// group unasked: a runner must name what it composes).
#[test]
fn compose_without_a_group_names_all() {
    let run = run_clawmd(["compose"], &[]).expect_code(2);
    let stderr = run.stderr();
    assert!(stderr.contains("<GROUPS|--all>"), "{stderr}");
    assert!(
        stderr.contains("Usage: clawmd compose <GROUPS|--all>"),
        "{stderr}"
    );
    // Both at once is still a usage error.
    run_clawmd(["compose", "main", "--all"], &[]).expect_code(2);
}

/// `render` with no group names `--cwd`, its other choice.
#[test]
fn render_without_a_group_names_cwd() {
    let run = run_clawmd(["render"], &[]).expect_code(2);
    let stderr = run.stderr();
    assert!(stderr.contains("<GROUP|--cwd <DIR>>"), "{stderr}");
    run_clawmd(["render", "main", "--cwd", "/"], &[]).expect_code(2);
}

/// Every page clawmd(1) refers to, clawmd-SUBCOMMAND(1), is printed by `clawmd man SUBCOMMAND`.
#[test]
fn every_page_the_manual_names_is_printed() {
    let page = run_clawmd(["man"], &[]).success().stdout();
    let named: Vec<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("clawmd\\-")?.strip_suffix("(1)"))
        .collect();
    assert!(named.contains(&"compose"), "{page}");
    for name in named {
        let sub = run_clawmd(["man", name], &[]).success().stdout();
        assert!(
            sub.contains(&format!(".TH clawmd-{name} 1 ")),
            "clawmd man {name}:\n{sub}"
        );
    }
    run_clawmd(["man", "nope"], &[]).expect_code(2);
}
