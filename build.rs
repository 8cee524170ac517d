//! Records the git commit the binary is built from (`HARNESS_GIT_COMMIT`) for run provenance
//! (`env.json`, reports). `-dirty` is appended when tracked files differed from HEAD when the
//! stamp was taken (it is retaken whenever HEAD or the index moves, not on every edit).
//! Outside a git checkout, or without git, it is `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).map(|head| {
        let dirty =
            git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        if dirty {
            format!("{head}-dirty")
        } else {
            head
        }
    });
    println!(
        "cargo:rustc-env=HARNESS_GIT_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
    // Rebuild the stamp when HEAD moves or the index changes (commits, checkouts).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
    if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
        println!("cargo:rerun-if-changed={common}/refs/heads");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
