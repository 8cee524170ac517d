//! The documented errors, through the real `harness` binary as a user runs it: a recipe with
//! a misspelt key and an installed dataset file with one flipped byte each give the
//! documented message and a non-zero exit; every shipped recipe validates.

mod binary;

use binary::{harness, repo, text};

#[test]
fn every_shipped_recipe_validates() {
    let home = tempfile::tempdir().unwrap();
    let mut args = vec!["validate".to_string()];
    for e in std::fs::read_dir(repo().join("recipes")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            args.push(p.to_string_lossy().into_owned());
        }
    }
    assert!(
        args.len() >= 6,
        "expected the paper recipes, found {args:?}"
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = harness(home.path(), &refs);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        text(&out).matches("\nok ").count() + 1,
        args.len() - 1,
        "{}",
        text(&out)
    );
}

#[test]
fn misspelt_key_is_named_with_file_line_key_path_and_suggestion() {
    let home = tempfile::tempdir().unwrap();
    let laser = std::fs::read_to_string(repo().join("recipes/laser.yaml")).unwrap();
    assert!(laser.contains("\n  encoder:"), "laser.yaml changed shape");
    let bad = laser.replacen("\n  encoder:", "\n  encodr:", 1);
    let line = bad[..bad.find("encodr:").unwrap()].lines().count();
    let path = home.path().join("bad.yaml");
    std::fs::write(&path, bad).unwrap();
    let out = harness(home.path(), &["validate", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let msg = text(&out);
    let expected = format!(
        "{}:{line}: model.encodr: unknown key `encodr`",
        path.display()
    );
    assert!(msg.contains(&expected), "missing `{expected}` in:\n{msg}");
    assert!(msg.contains("did you mean `encoder`?"), "{msg}");
}

#[test]
fn flipped_byte_in_an_installed_dataset_fails_verify_naming_the_file() {
    let home = tempfile::tempdir().unwrap();
    let out = harness(home.path(), &["datasets", "fetch", "sts17"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harness(home.path(), &["datasets", "verify", "sts17"]);
    assert!(out.status.success(), "{}", text(&out));

    let data = home
        .path()
        .join("datasets")
        .join("sts17")
        .join("STS2017.gs");
    let victim = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_file())
        .expect("a gold-standard file in sts17/STS2017.gs");
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&victim, bytes).unwrap();

    let out = harness(home.path(), &["datasets", "verify", "sts17"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let msg = text(&out);
    let name = victim.file_name().unwrap().to_string_lossy();
    assert!(msg.contains(name.as_ref()), "{msg}");
    assert!(msg.contains("sha256"), "{msg}");
    assert!(
        msg.contains("harness datasets fetch sts17"),
        "the fix is missing: {msg}"
    );
}
