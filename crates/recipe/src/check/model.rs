//! The checks of `model`: the further encoders and the languages that read them, the
//! encoder's settings, the decoder and the heads.

use super::{k, list, p, positive, suggest, with, Findings, Known};
use crate::de::{Path, Seg};
use crate::schema::*;

/// Checks `model`: its further encoders, its encoder, its decoder, then each head.
pub(super) fn check(m: &Model, recipe: &Recipe, known: &Known, out: &mut Findings) {
    further_encoders(m, out);
    encoder(&m.encoder, out);
    if let Some(Decoder::Lstm(d)) = &m.decoder {
        lstm_decoder(d, recipe, known, out);
    }
    for (name, h) in &m.heads {
        head(name, h, out);
    }
}

/// `model.encoders` and `model.languages`: no further encoder named `encoder`, each
/// language reading a further encoder, and every further encoder one that is trained.
fn further_encoders(m: &Model, out: &mut Findings) {
    if m.encoders.contains_key("encoder") {
        out.add(
            p(&["model", "encoders", "encoder"]),
            "`encoder` names `model.encoder`; give this encoder another name",
        );
    }
    let further: Vec<String> = m.encoders.keys().cloned().collect();
    for (language, name) in &m.languages {
        out.refer(
            p(&["model", "languages", language]),
            "further encoder",
            name,
            &further,
            " (the keys of `model.encoders`)",
        );
    }
    for (name, e) in &m.encoders {
        if matches!(e, Encoder::Pretrained(_) | Encoder::Hashed(_)) {
            out.add(
                p(&["model", "encoders", name, "kind"]),
                format!("a further encoder is trained; `{}` is not", e.kind()),
            );
        }
    }
}

/// A size that must be at least 1.
fn at_least_1(out: &mut Findings, path: Path, v: u32, what: &str) {
    if v == 0 {
        out.add(path, format!("{what} must be ≥ 1, found 0"));
    }
}

/// A dropout probability, in [0, 1).
fn dropout(out: &mut Findings, path: Path, v: f64) {
    if !(0.0..1.0).contains(&v) {
        out.add(path, format!("dropout must be in [0, 1), found {v}"));
    }
}

/// A head's number of classes, when given: at least 2.
fn classes(out: &mut Findings, path: Path, classes: Option<u32>) {
    if let Some(c) = classes.filter(|c| *c < 2) {
        out.add(path, format!("must be ≥ 2, found {c}"));
    }
}

/// `model.encoder`: the sizes, dropout and pooling its kind allows.
fn encoder(encoder: &Encoder, out: &mut Findings) {
    let enc = p(&["model", "encoder"]);
    let f = |key: &str| with(&enc, &[k(key)]);
    match encoder {
        Encoder::Bilstm(e) => {
            at_least_1(out, f("layers"), e.layers, "layers");
            at_least_1(out, f("hidden"), e.hidden, "hidden");
            at_least_1(out, f("embed"), e.embed, "embed");
            dropout(out, f("dropout"), e.dropout);
            if e.pool == Pool::Cls {
                out.add(f("pool"), "a BiLSTM pools with `max`, `mean` or `last`");
            }
        }
        Encoder::Lstm(e) => {
            at_least_1(out, f("layers"), e.layers, "layers");
            at_least_1(out, f("hidden"), e.hidden, "hidden");
            at_least_1(out, f("embed"), e.embed, "embed");
            if e.top_hidden == Some(0) {
                out.add(f("top_hidden"), "top_hidden must be ≥ 1, found 0");
            }
            dropout(out, f("dropout"), e.dropout);
            if e.pool == Pool::Cls {
                out.add(f("pool"), "an LSTM pools with `max`, `mean` or `last`");
            }
        }
        Encoder::Transformer(e) => transformer(e, &enc, out),
        Encoder::Cbow(e) => at_least_1(out, f("embed"), e.embed, "embed"),
        Encoder::Hashed(e) => hashed(e, &enc, out),
        Encoder::Pretrained(e) => pretrained(e, &enc, out),
    }
}

/// A transformer encoder at `enc`: its sizes, heads dividing `d_model`, dropout, pooling.
fn transformer(e: &TransformerEncoder, enc: &Path, out: &mut Findings) {
    let f = |key: &str| with(enc, &[k(key)]);
    at_least_1(out, f("layers"), e.layers, "layers");
    at_least_1(out, f("d_model"), e.d_model, "d_model");
    at_least_1(out, f("d_ff"), e.d_ff, "d_ff");
    at_least_1(out, f("heads"), e.heads, "heads");
    at_least_1(out, f("max_len"), e.max_len, "max_len");
    if e.heads > 0 && !e.d_model.is_multiple_of(e.heads) {
        out.add(
            f("heads"),
            format!(
                "d_model ({}) must be divisible by heads ({})",
                e.d_model, e.heads
            ),
        );
    }
    if e.embed == Some(0) {
        out.add(f("embed"), "embed must be ≥ 1, found 0");
    }
    dropout(out, f("dropout"), e.dropout);
    if e.pool == Pool::Last {
        out.add(
            f("pool"),
            "a transformer pools with `mean`, `max` or `cls` (`last` is for recurrent encoders)",
        );
    }
}

/// A hashed encoder at `enc`: its size, the n-grams implemented, its bucket count.
fn hashed(e: &HashedEncoder, enc: &Path, out: &mut Findings) {
    let f = |key: &str| with(enc, &[k(key)]);
    at_least_1(out, f("dim"), e.dim, "dim");
    // What crates/embed/src/hashed.rs implements (multilingual USE §2.1's input
    // features); `harness run` used to refuse anything else only after validation.
    if e.word_ngrams != [1] || e.char_ngrams != [3, 4] {
        out.add(
            enc.clone(),
            format!(
                "the hashed encoder implements word unigrams and character 3- and \
                 4-grams only (multilingual USE §2.1); found word_ngrams {:?}, \
                 char_ngrams {:?}. Fix: use word_ngrams: [1], char_ngrams: [3, 4]",
                e.word_ngrams, e.char_ngrams
            ),
        );
    }
    if !e.buckets.is_power_of_two() {
        out.add(
            f("buckets"),
            format!("{} is not a power of two. Fix: use e.g. 1048576", e.buckets),
        );
    }
}

/// A pretrained encoder at `enc`: a known name, or a path.
fn pretrained(e: &PretrainedEncoder, enc: &Path, out: &mut Findings) {
    let path_like = e.name.contains('/') || e.name.starts_with('.') || e.name.contains('\\');
    if !path_like && !PRETRAINED_NAMES.contains(&e.name.as_str()) {
        out.add_suggest(
            with(enc, &[k("name")]),
            format!(
                "unknown pretrained encoder `{}`; expected one of {} or a path (containing `/`)",
                e.name,
                list(PRETRAINED_NAMES)
            ),
            suggest(&e.name, PRETRAINED_NAMES),
        );
    }
}

/// `model.decoder` (an LSTM): its sizes, its target languages, and some task using it.
fn lstm_decoder(d: &LstmDecoder, recipe: &Recipe, known: &Known, out: &mut Findings) {
    let dp = |key: &str| p(&["model", "decoder", key]);
    at_least_1(out, dp("layers"), d.layers, "layers");
    at_least_1(out, dp("hidden"), d.hidden, "hidden");
    at_least_1(out, dp("embed"), d.embed, "embed");
    if d.targets.is_empty() {
        out.add(
            dp("targets"),
            "list the languages the decoder translates into (`targets: [en, es]`)",
        );
    }
    let decoding: Vec<&str> = known
        .objectives
        .iter()
        .filter(|o| o.uses_decoder)
        .map(|o| o.name)
        .collect();
    let used = recipe
        .tasks
        .iter()
        .any(|t| decoding.contains(&t.objective.name()));
    if !used && !recipe.tasks.is_empty() && !decoding.is_empty() {
        out.add(
            p(&["model", "decoder"]),
            format!("no task uses the decoder (objective {})", list(&decoding)),
        );
    }
}

/// One head under `model.heads`: its layer sizes, classes, dropout and the settings its
/// kind has.
fn head(name: &str, h: &Head, out: &mut Findings) {
    let hp = |key: &str| p(&["model", "heads", name, key]);
    match h {
        Head::Mlp(h) => {
            for (i, n) in h.hidden.iter().enumerate() {
                if *n == 0 {
                    out.add(
                        with(&hp("hidden"), &[Seg::Index(i)]),
                        "layer size must be ≥ 1",
                    );
                }
            }
            classes(out, hp("classes"), h.classes);
            dropout(out, hp("dropout"), h.dropout);
        }
        Head::L2Softmax(h) => {
            if !(h.alpha > 0.0 && h.alpha.is_finite()) {
                out.add(hp("alpha"), format!("must be > 0, found {}", h.alpha));
            }
            classes(out, hp("classes"), h.classes);
        }
        Head::Centers(h) => classes(out, hp("classes"), h.classes),
        Head::Discriminator(h) => {
            if !positive(h.clip) {
                out.add(hp("clip"), format!("must be > 0, found {}", h.clip));
            }
            dropout(out, hp("dropout"), h.dropout);
        }
    }
}
