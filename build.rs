//! Build-time facts the binary reports about itself: the git commit it was built from
//! (`HARNESS_GIT_COMMIT`, printed in every report's provenance; `unknown` when building
//! outside a git checkout). It also makes cargo rebuild when files are added to the
//! directories compiled in with `include_dir!` (which only notices edits of known files).

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
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=HARNESS_GIT_COMMIT={commit}");
    // Re-run when HEAD moves: the HEAD file (branch switches), the branch's ref and the
    // packed refs. Only paths that exist: cargo re-runs every build for a missing one.
    let mut watch = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git(&["rev-parse", "--git-path", &branch]));
    }
    watch.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    for path in watch.into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    for dir in ["benchmarks", "reports/templates"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
