//! Makes cargo rebuild this crate when files are added to the directories it compiles in
//! with `include_dir!` (which by itself only notices edits of files it already knows).

fn main() {
    println!("cargo:rerun-if-changed=../../benchmarks/tables");
    println!("cargo:rerun-if-changed=../../reports/templates");
    println!("cargo:rerun-if-changed=build.rs");
}
