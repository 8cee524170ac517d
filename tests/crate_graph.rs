//! The two drawings of the crate graph, `src/lib.rs`'s doc comment and README.md's "Layout",
//! against the workspace's `Cargo.toml` files as `cargo metadata` reads them: every
//! dependency of a workspace package on another (normal or build; dev-dependencies make no
//! layer) is an arrow in each drawing, and every arrow is such a dependency. Only
//! `cargo metadata --no-deps` runs: nothing is compiled, resolved or fetched.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// (from, to) by short name: `core` for `harness-core`, `harness` for the root package.
type Edges = BTreeSet<(String, String)>;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn short(package: &str) -> String {
    package
        .strip_prefix("harness-")
        .unwrap_or(package)
        .to_string()
}

/// The workspace's dependency edges, from `cargo metadata --format-version 1 --no-deps`.
fn metadata_edges() -> Edges {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(repo())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("its JSON");
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .filter_map(|id| id.as_str())
        .collect();
    let packages: Vec<&serde_json::Value> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["id"].as_str().is_some_and(|id| members.contains(id)))
        .collect();
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut edges = Edges::new();
    for p in &packages {
        let from = p["name"].as_str().expect("package name");
        for d in p["dependencies"].as_array().expect("dependencies") {
            // `name` is the package depended on, also under a `rename`.
            let to = d["name"].as_str().expect("dependency name");
            if names.contains(to) && d["kind"].as_str() != Some("dev") {
                edges.insert((short(from), short(to)));
            }
        }
    }
    edges
}

fn read(file: &str) -> String {
    std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The first fenced block of `text` opening with `fence` (its lines, fences excluded).
fn block<'a>(text: &'a str, fence: &str, what: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| l.trim_end() != fence);
    assert!(lines.next().is_some(), "{what}: no {fence} block");
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("```")).collect();
    assert!(!body.is_empty(), "{what}: empty {fence} block");
    body
}

/// `src/lib.rs`: lines `NAME [(…)] ─▶ a, b, c` in the doc comment's ```text block.
fn lib_rs_edges() -> Edges {
    let text = read("src/lib.rs");
    let doc: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    let mut edges = Edges::new();
    for line in block(&doc, "```text", "src/lib.rs") {
        if let Some((from, to)) = line.split_once("─▶") {
            let from = from.split_whitespace().next().expect("a crate before ─▶");
            for to in to.split(',') {
                edges.insert((from.to_string(), to.trim().to_string()));
            }
        }
    }
    edges
}

/// README.md, "Layout": the tree under `harness`, whose branches `─▶ harness-NAME` are the
/// root package's dependencies and whose `└─▶ a, b, c` lines are NAME's.
fn readme_edges() -> Edges {
    let text = read("README.md");
    let layout = text
        .split_once("\n## Layout\n")
        .expect("README.md has a \"## Layout\" section")
        .1;
    let tree = block(layout, "```", "README.md, Layout");
    let root = tree[0]
        .split_whitespace()
        .next()
        .expect("the tree's root")
        .to_string();
    let mut edges = Edges::new();
    let mut current: Option<String> = None;
    for line in &tree[1..] {
        if let Some((_, rest)) = line.split_once("─▶ harness-") {
            let name = rest.split_whitespace().next().expect("a crate name");
            edges.insert((root.clone(), name.to_string()));
            current = Some(name.to_string());
        } else if let Some((_, to)) = line.split_once("└─▶") {
            let from = current.clone().expect("a └─▶ line below a crate");
            for to in to.split(',') {
                edges.insert((from.clone(), to.trim().to_string()));
            }
        }
    }
    edges
}

fn assert_same(drawing: &str, drawn: &Edges, cargo: &Edges) {
    let arrow = |(a, b): &(String, String)| format!("{a} ─▶ {b}");
    let missing: Vec<String> = cargo.difference(drawn).map(arrow).collect();
    let extra: Vec<String> = drawn.difference(cargo).map(arrow).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{drawing} does not draw the crate graph of `cargo metadata`:\n  dependencies it lacks: {missing:?}\n  arrows that are no dependency: {extra:?}"
    );
}

#[test]
fn the_crate_diagrams_are_the_dependency_graph() {
    let cargo = metadata_edges();
    // Sanity: the root package uses every workspace crate, and the layers use each other.
    assert!(cargo.contains(&("harness".to_string(), "core".to_string())));
    assert!(cargo.len() > 20, "{} edges: {cargo:?}", cargo.len());
    assert_same("src/lib.rs", &lib_rs_edges(), &cargo);
    assert_same("README.md, \"Layout\"", &readme_edges(), &cargo);
}
