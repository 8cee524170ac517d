//! A trained run as the start of another (Emu §3.1 fine-tunes LASER): `recipes/emu.yaml`
//! with `model.encoder.name` set to a small LASER run trained here. The new run copies the
//! base's tokenizer, records the base (`base-encoder.json`), starts from its weights (a
//! frozen copy embeds exactly as the base), trains on when fine-tuned, exports in the BiLSTM
//! layout, and refuses to resume once the base has changed.

mod binary;

use binary::{embed_npy as embed, harness, repo, text, SMALL_LASER};
use std::path::Path;

fn train_base(home: &Path, run: &Path, stop_after: Option<&str>) {
    let recipe = repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(SMALL_LASER);
    args.extend_from_slice(&[
        "--set",
        "train={steps: 4, batch_tokens: 300, max_len: 20, checkpoint_every: 2}",
        "--out",
        run.to_str().unwrap(),
    ]);
    if let Some(s) = stop_after {
        args.extend_from_slice(&["--stop-after", s]);
    }
    let o = harness(home, &args);
    assert!(o.status.success(), "{}", text(&o));
}

/// `harness train recipes/emu.yaml` from `base`, two steps.
fn train_emu(home: &Path, base: &Path, trainable: bool, run: &Path) -> std::process::Output {
    let recipe = repo().join("recipes/emu.yaml");
    let encoder = format!(
        "model.encoder={{kind: pretrained, name: {}, trainable: {trainable}, pool: max}}",
        base.display()
    );
    let args = [
        "train",
        recipe.to_str().unwrap(),
        "--set",
        &encoder,
        "--set",
        "data.corpora.intents_en.max_examples=64",
        "--set",
        "data.corpora.other_languages.max_examples=64",
        "--set",
        "train={steps: 2, batch_size: 8, max_len: 24, checkpoint_every: 2}",
        "--set",
        "evaluate=[]",
        "--out",
        run.to_str().unwrap(),
    ];
    harness(home, &args)
}

#[test]
fn a_trained_laser_run_starts_emu() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("laser");
    train_base(home.path(), &base, None);
    let input = out.path().join("s.txt");
    std::fs::write(
        &input,
        "book a flight to boston\nWie wird das Wetter morgen?\nimposta una sveglia\n",
    )
    .unwrap();
    let base_vectors = embed(home.path(), &base, &input, &out.path().join("base.npy"));

    // Frozen: only the heads train, so the run's encoder is the base's, value for value.
    let frozen = out.path().join("emu-frozen");
    let o = train_emu(home.path(), &base, false, &frozen);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read(frozen.join("tokenizer.json")).unwrap(),
        std::fs::read(base.join("tokenizer.json")).unwrap()
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(frozen.join("base-encoder.json")).unwrap()).unwrap();
    assert_eq!(record["encoder"]["kind"], "bilstm", "{record}");
    assert_eq!(record["weights_sha256"].as_str().unwrap().len(), 64);
    let frozen_vectors = embed(home.path(), &frozen, &input, &out.path().join("frozen.npy"));
    assert_eq!(frozen_vectors, base_vectors);

    // Fine-tuned: it moves away from the base, and exports as a BiLSTM.
    let tuned = out.path().join("emu-tuned");
    let o = train_emu(home.path(), &base, true, &tuned);
    assert!(o.status.success(), "{}", text(&o));
    let tuned_vectors = embed(home.path(), &tuned, &input, &out.path().join("tuned.npy"));
    assert_eq!(tuned_vectors.len(), base_vectors.len());
    assert_ne!(tuned_vectors, base_vectors);
    let export = out.path().join("export");
    let o = harness(
        home.path(),
        &[
            "export",
            tuned.to_str().unwrap(),
            "--out",
            export.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(export.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["architecture"], "harness-bilstm", "{config}");
    assert!(export.join("encoder.safetensors").is_file());
}

/// A run records its base; once the base trains on, resuming is refused, nothing touched.
#[test]
fn a_run_whose_base_changed_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let base = out.path().join("laser");
    train_base(home.path(), &base, Some("2"));
    let emu = out.path().join("emu");
    let o = train_emu(home.path(), &base, true, &emu);
    assert!(o.status.success(), "{}", text(&o));
    let record = std::fs::read(emu.join("base-encoder.json")).unwrap();
    let weights = std::fs::read(emu.join("checkpoints/step-00000002/model.mpk")).unwrap();

    train_base(home.path(), &base, None);
    let o = train_emu(home.path(), &base, true, &emu);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("started from another model"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read(emu.join("base-encoder.json")).unwrap(),
        record
    );
    assert_eq!(
        std::fs::read(emu.join("checkpoints/step-00000002/model.mpk")).unwrap(),
        weights
    );
}
