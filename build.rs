//! Build-time facts the binary reports about itself: the git commit it was built from
//! (`HARNESS_GIT_COMMIT`, in `env.json` and every report's provenance; `unknown` when
//! building outside a git checkout). `-dirty` is appended when tracked files differed from
//! HEAD when the stamp was taken (it is retaken whenever HEAD or the index moves, not on
//! every edit). Only this root package has it: a commit rebuilds the binary, not the
//! crates below it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).map_or_else(
        || "unknown".to_string(),
        |head| {
            // `--no-optional-locks`: a plain `git status` refreshes `.git/index` when its
            // stat data is stale (always, in a fresh clone), and the index is watched below,
            // so the next `cargo build` or `cargo run` would run this script again and
            // re-link the binary for nothing.
            let dirty = git(&[
                "--no-optional-locks",
                "status",
                "--porcelain",
                "--untracked-files=no",
            ])
            .is_some();
            if dirty {
                format!("{head}-dirty")
            } else {
                head
            }
        },
    );
    println!("cargo:rustc-env=HARNESS_GIT_COMMIT={commit}");
    // Re-run when HEAD moves or the index changes: the HEAD file (branch switches), the
    // branch's ref, the packed refs and the index. Only paths that exist: cargo re-runs
    // every build for a missing one.
    let mut watch = vec![
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["rev-parse", "--git-path", "index"]),
    ];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watch.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watch.into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
