//! The recipe language end to end, in process: loading, inheritance, profiles, `--set`,
//! error reports (file, key path, line, did-you-mean), fingerprints, and every recipe in
//! `recipes/`.

use clap::Parser;
use harness_recipe as recipe;
use harness_recipe::{Known, LoadOptions, Problem};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Known names for tests: the embedded benchmarks, and an explicit dataset list (the lock
/// may still be empty).
fn known() -> Known {
    let mut k = harness_bench::known().unwrap();
    // The trainer's objectives, as the binary installs them.
    k.objectives = harness_train::objectives::schemas();
    k.datasets = [
        "parallel-pairs",
        "wmt-news-parallel",
        "conversation-pairs",
        "monolingual-sentences",
        "snli",
        "sick",
        "xsid",
        "atis",
        "xnli",
        "tatoeba-laser-v1",
    ]
    .map(String::from)
    .to_vec();
    k
}

const VALID: &str = "\
name: tiny
data:
  tokenizer: {kind: bpe, vocab: 1000}
  corpora:
    pairs: {dataset: parallel-pairs, pairs: [deu-eng], exclude: [tatoeba]}
model:
  encoder: {kind: bilstm, layers: 1, hidden: 32, embed: 16, pool: max}
  decoder: {kind: lstm, hidden: 64, targets: [eng]}
tasks:
  - {name: translate, objective: seq2seq_ce, corpus: pairs}
optimizer: {kind: adam, lr: 0.001}
train: {steps: 10, batch_tokens: 500}
evaluate: [tatoeba, xnli]
profiles:
  big: {model.encoder.layers: 3, train.steps: 100}
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

fn problems(path: &Path, opts: &LoadOptions) -> Vec<Problem> {
    match recipe::load_with(path, opts, &known()) {
        Ok(_) => panic!("{} should be invalid", path.display()),
        Err(e) => e.problems().to_vec(),
    }
}

fn only(ps: &[Problem], key: &str) -> Problem {
    let hits: Vec<&Problem> = ps.iter().filter(|p| p.key == key).collect();
    assert_eq!(
        hits.len(),
        1,
        "one problem at `{key}` expected, got: {ps:#?}"
    );
    hits[0].clone()
}

fn line_of(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).unwrap() + 1
}

#[test]
fn a_valid_recipe_loads_with_defaults_filled() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "tiny.yaml", VALID);
    let r = recipe::load_with(&p, &LoadOptions::default(), &known()).unwrap();
    assert_eq!(r.recipe.name, "tiny");
    assert_eq!(
        r.recipe.optimizer.as_ref().unwrap().eps,
        1e-8,
        "PyTorch's ε, not burn's"
    );
    assert_eq!(r.profiles, ["big"]);
    assert!(r.recipe.profiles.is_empty());
    assert_eq!(r.fingerprint.short().len(), 16);
    let yaml = r.to_yaml().unwrap();
    assert!(
        yaml.contains("eps: 1.0e-8") || yaml.contains("eps: 1e-8"),
        "{yaml}"
    );
    assert!(!yaml.contains("profiles"), "{yaml}");
}

#[test]
fn misspelt_key_names_file_key_path_line_and_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID.replace("  encoder: {kind: bilstm", "  encodr: {kind: bilstm");
    let p = write(dir.path(), "typo.yaml", &text);
    let ps = problems(&p, &LoadOptions::default());
    let e = only(&ps, "model.encodr");
    assert_eq!(e.file, p);
    assert_eq!(e.line, Some(line_of(&text, "encodr")));
    assert_eq!(e.suggestion.as_deref(), Some("encoder"));
    let shown = e.to_string();
    assert!(
        shown.contains("typo.yaml:7: model.encodr: unknown key `encodr`"),
        "{shown}"
    );
    assert!(shown.contains("did you mean `encoder`"), "{shown}");
    // The missing encoder that follows is a knock-on problem of the typo: reported once.
    assert!(ps.iter().all(|p| p.key != "model.encoder"), "{ps:#?}");
}

#[test]
fn wrong_type_names_the_exact_key_inside_a_kind() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID.replace("layers: 1, hidden: 32", "layers: three, hidden: 32");
    let p = write(dir.path(), "type.yaml", &text);
    let e = only(
        &problems(&p, &LoadOptions::default()),
        "model.encoder.layers",
    );
    assert!(e.message.contains("wrong type"), "{e}");
    assert!(e.message.contains("string \"three\""), "{e}");
    assert_eq!(e.line, Some(line_of(&text, "three")));
}

#[test]
fn out_of_range_values_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID
        .replace("lr: 0.001", "lr: -0.1")
        .replace("layers: 1, hidden: 32", "layers: 0, hidden: 32");
    let p = write(dir.path(), "range.yaml", &text);
    let ps = problems(&p, &LoadOptions::default());
    let lr = only(&ps, "optimizer.lr");
    assert!(lr.message.contains("must be > 0, found -0.1"), "{lr}");
    assert_eq!(lr.line, Some(line_of(&text, "lr: -0.1")));
    let layers = only(&ps, "model.encoder.layers");
    assert!(layers.message.contains("must be ≥ 1, found 0"), "{layers}");
    // A negative count is a range error too, found while typing.
    let text = VALID.replace("layers: 1, hidden: 32", "layers: -2, hidden: 32");
    let p = write(dir.path(), "neg.yaml", &text);
    let e = only(
        &problems(&p, &LoadOptions::default()),
        "model.encoder.layers",
    );
    assert!(e.message.contains("-2"), "{e}");
    // A fraction above 1, and autoencoding with both directions (which it does not apply to).
    for (params, message) in [
        ("{autoencode: 1.5}", "must be in [0, 1], found 1.5"),
        (
            "{autoencode: 0.5, both_directions: true}",
            "applies to one-direction training",
        ),
    ] {
        let text = VALID.replace(
            "corpus: pairs}",
            &format!("corpus: pairs, params: {params}}}"),
        );
        let p = write(dir.path(), "autoencode.yaml", &text);
        let e = only(
            &problems(&p, &LoadOptions::default()),
            "tasks[0].params.autoencode",
        );
        assert!(e.message.contains(message), "{e}");
    }
}

#[test]
fn transformer_sizes_and_pooling_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID.replace(
        "{kind: bilstm, layers: 1, hidden: 32, embed: 16, pool: max}",
        "{kind: transformer, layers: 1, d_model: 30, d_ff: 64, heads: 4, pool: last, embed: 0}",
    );
    let p = write(dir.path(), "transformer.yaml", &text);
    let ps = problems(&p, &LoadOptions::default());
    let heads = only(&ps, "model.encoder.heads");
    assert!(
        heads
            .message
            .contains("d_model (30) must be divisible by heads (4)"),
        "{heads}"
    );
    let embed = only(&ps, "model.encoder.embed");
    assert!(embed.message.contains("must be ≥ 1, found 0"), "{embed}");
    let pool = only(&ps, "model.encoder.pool");
    assert!(pool.message.contains("`mean`, `max` or `cls`"), "{pool}");
    // `embed` is optional and written back only when set.
    let text = VALID.replace(
        "{kind: bilstm, layers: 1, hidden: 32, embed: 16, pool: max}",
        "{kind: transformer, layers: 1, d_model: 32, d_ff: 64, heads: 4}",
    );
    let p = write(dir.path(), "ok.yaml", &text);
    let loaded = recipe::load_with(&p, &LoadOptions::default(), &known()).unwrap();
    let yaml = serde_yaml::to_string(&loaded.recipe.model.unwrap().encoder).unwrap();
    assert!(!yaml.contains("embed"), "{yaml}");
}

#[test]
fn every_problem_of_a_file_is_reported_not_just_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID
        .replace("  encoder: {kind: bilstm", "  encodr: {kind: bilstm")
        .replace("lr: 0.001", "lr: -0.1")
        .replace("corpus: pairs}", "corpus: pair}")
        .replace("[tatoeba, xnli]", "[tatoeba, xnil]")
        .replace("steps: 10,", "steps: ten,");
    let p = write(dir.path(), "many.yaml", &text);
    let ps = problems(&p, &LoadOptions::default());
    let keys: Vec<&str> = ps.iter().map(|p| p.key.as_str()).collect();
    for k in [
        "model.encodr",
        "optimizer.lr",
        "tasks[0].corpus",
        "evaluate[1]",
        "train.steps",
    ] {
        assert!(keys.contains(&k), "{k} not reported: {ps:#?}");
    }
    // Sorted by line.
    let lines: Vec<usize> = ps.iter().filter_map(|p| p.line).collect();
    assert!(lines.windows(2).all(|w| w[0] <= w[1]), "{lines:?}");
}

#[test]
fn undefined_corpus_task_and_head_references_suggest_the_defined_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID.replace("corpus: pairs}", "corpus: pair}");
    let p = write(dir.path(), "ref.yaml", &text);
    let e = only(&problems(&p, &LoadOptions::default()), "tasks[0].corpus");
    assert!(e.message.contains("`pair` is not a corpus"), "{e}");
    assert_eq!(e.suggestion.as_deref(), Some("pairs"));
    assert_eq!(e.line, Some(line_of(&text, "corpus: pair}")));

    let text = VALID.replace(
        "  - {name: translate, objective: seq2seq_ce, corpus: pairs}",
        "  - {name: translate, objective: seq2seq_ce, corpus: pairs}\n  - {name: sim, objective: l2_similarity, corpus: pairs, params: {joint_with: translat}}\n  - {name: nli, objective: nli_classification, corpus: pairs, params: {head: nli}}",
    );
    let p = write(dir.path(), "ref2.yaml", &text);
    let ps = problems(&p, &LoadOptions::default());
    let e = only(&ps, "tasks[1].params.joint_with");
    assert_eq!(e.suggestion.as_deref(), Some("translate"));
    let e = only(&ps, "tasks[2].params.head");
    assert!(e.message.contains("not a head"), "{e}");
}

#[test]
fn unknown_objective_parameters_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID.replace(
        "corpus: pairs}",
        "corpus: pairs, params: {both_direction: true}}",
    );
    let p = write(dir.path(), "param.yaml", &text);
    let e = only(
        &problems(&p, &LoadOptions::default()),
        "tasks[0].params.both_direction",
    );
    assert_eq!(e.suggestion.as_deref(), Some("both_directions"));
    let text = VALID.replace("objective: seq2seq_ce", "objective: seq2seq");
    let p = write(dir.path(), "obj.yaml", &text);
    let e = only(&problems(&p, &LoadOptions::default()), "tasks[0].objective");
    assert_eq!(e.suggestion.as_deref(), Some("seq2seq_ce"));
}

#[test]
fn unknown_dataset_benchmark_and_table_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID
        .replace("dataset: parallel-pairs", "dataset: parallel-pair")
        .replace("[tatoeba, xnli]", "[tatoeba, xnil]")
        .replace("profiles:", "report: [laser-xnil]\nprofiles:");
    let p = write(dir.path(), "names.yaml", &text);
    let ps = problems(&p, &LoadOptions::default());
    assert_eq!(
        only(&ps, "data.corpora.pairs.dataset")
            .suggestion
            .as_deref(),
        Some("parallel-pairs")
    );
    let e = only(&ps, "evaluate[1]");
    assert_eq!(e.suggestion.as_deref(), Some("xnli"));
    assert_eq!(e.line, Some(line_of(&text, "xnil")));
    let e = only(&ps, "report[0]");
    assert!(e.message.contains("not a report table"), "{e}");
    assert_eq!(e.suggestion.as_deref(), Some("laser-xnli"));

    // With no dataset names known (the lock not yet filled), datasets are not checked.
    let mut k = known();
    k.datasets.clear();
    let text = VALID.replace("dataset: parallel-pairs", "dataset: anything");
    let p = write(dir.path(), "nolock.yaml", &text);
    recipe::load_with(&p, &LoadOptions::default(), &k).unwrap();
}

#[test]
fn profiles_apply_and_unknown_profiles_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "tiny.yaml", VALID);
    let opts = LoadOptions {
        profile: Some("big".into()),
        sets: vec![],
    };
    let r = recipe::load_with(&p, &opts, &known()).unwrap();
    assert_eq!(r.recipe.train.as_ref().unwrap().steps, Some(100));
    match &r.recipe.model.as_ref().unwrap().encoder {
        recipe::schema::Encoder::Bilstm(b) => assert_eq!(b.layers, 3),
        other => panic!("{other:?}"),
    }
    let opts = LoadOptions {
        profile: Some("bg".into()),
        sets: vec![],
    };
    let e = only(&problems(&p, &opts), "profiles");
    assert!(e.message.contains("unknown profile `bg`"), "{e}");
    assert_eq!(e.suggestion.as_deref(), Some("big"));

    // A profile that breaks the recipe is traced to the profile's line.
    let text = VALID.replace("model.encoder.layers: 3", "model.encoder.layers: 0");
    let p = write(dir.path(), "badprofile.yaml", &text);
    let opts = LoadOptions {
        profile: Some("big".into()),
        sets: vec![],
    };
    let e = only(&problems(&p, &opts), "model.encoder.layers");
    assert_eq!(e.line, Some(line_of(&text, "model.encoder.layers: 0")));
    assert!(e.note.as_deref().unwrap().contains("profile `big`"), "{e}");
    // `validate` without --profile checks every profile too.
    let ps = recipe::validate(&p, &LoadOptions::default(), &known()).unwrap_err();
    assert!(
        ps.iter().any(|p| p.key == "model.encoder.layers"),
        "{ps:#?}"
    );
}

#[test]
fn set_overrides_are_applied_and_type_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "tiny.yaml", VALID);
    let opts = LoadOptions {
        profile: None,
        sets: vec![
            "train.steps=42".into(),
            "optimizer.lr=3e-4".into(),
            "evaluate=[xnli]".into(),
            "tasks.translate.weight=2".into(),
        ],
    };
    let r = recipe::load_with(&p, &opts, &known()).unwrap();
    assert_eq!(r.recipe.train.as_ref().unwrap().steps, Some(42));
    assert_eq!(r.recipe.optimizer.as_ref().unwrap().lr, 3e-4);
    assert_eq!(r.recipe.evaluate, ["xnli"]);
    assert_eq!(r.recipe.tasks[0].weight, 2.0);

    let opts = LoadOptions {
        profile: None,
        sets: vec!["train.steps=many".into(), "model.encoder.layrs=2".into()],
    };
    let ps = problems(&p, &opts);
    let e = only(&ps, "train.steps");
    assert!(e.message.contains("wrong type"), "{e}");
    assert!(
        e.note
            .as_deref()
            .unwrap()
            .contains("--set train.steps=many"),
        "{e}"
    );
    let e = only(&ps, "model.encoder.layrs");
    assert_eq!(e.suggestion.as_deref(), Some("layers"));
}

#[test]
fn base_inheritance_is_relative_to_the_file_and_errors_point_into_the_base() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "base.yaml", VALID);
    let child = write(
        dir.path(),
        "variants/child.yaml",
        "base: ../base.yaml\nname: child\nmodel:\n  encoder: {layers: 2}\n",
    );
    let r = recipe::load_with(&child, &LoadOptions::default(), &known()).unwrap();
    assert_eq!(r.recipe.name, "child");
    match &r.recipe.model.as_ref().unwrap().encoder {
        recipe::schema::Encoder::Bilstm(b) => {
            assert_eq!((b.layers, b.hidden), (2, 32), "merged key by key");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(r.recipe.tasks.len(), 1, "inherited");

    // A problem in the base is reported at the base file's line.
    let bad_base = VALID.replace("lr: 0.001", "lr: -1.0");
    let base = write(dir.path(), "badbase.yaml", &bad_base);
    let child = write(dir.path(), "c2.yaml", "base: badbase.yaml\nname: c2\n");
    let e = only(&problems(&child, &LoadOptions::default()), "optimizer.lr");
    assert_eq!(e.file, base);
    assert_eq!(e.line, Some(line_of(&bad_base, "lr: -1.0")));

    // Loops and missing bases are errors, not hangs.
    let a = write(dir.path(), "loop-a.yaml", "base: loop-b.yaml\nname: a\n");
    write(dir.path(), "loop-b.yaml", "base: loop-a.yaml\nname: b\n");
    let e = problems(&a, &LoadOptions::default());
    assert!(e[0].message.contains("loops"), "{e:#?}");
    let m = write(dir.path(), "missing.yaml", "base: nowhere.yaml\nname: m\n");
    let e = problems(&m, &LoadOptions::default());
    assert_eq!(e[0].line, Some(1));
}

#[test]
fn fingerprint_is_stable_under_reordering_and_changes_with_values() {
    let dir = tempfile::tempdir().unwrap();
    let fp = |name: &str, text: &str| {
        let p = write(dir.path(), name, text);
        recipe::load_with(&p, &LoadOptions::default(), &known())
            .unwrap()
            .fingerprint
    };
    let a = fp("a.yaml", VALID);
    // Same content: keys reordered, flow style turned to block style, comments added,
    // a default spelt out, profiles changed (they are not part of the resolved recipe).
    let reordered = "\
# a comment
evaluate:
  - tatoeba
  - xnli
train: {batch_tokens: 500, steps: 10}
optimizer: {lr: 0.001, kind: adam, eps: 1.0e-8}
tasks:
  - {corpus: pairs, objective: seq2seq_ce, name: translate}
model:
  decoder: {targets: [eng], hidden: 64, kind: lstm}
  encoder:
    pool: max
    embed: 16
    hidden: 32
    layers: 1
    kind: bilstm
data:
  corpora:
    pairs: {exclude: [tatoeba], pairs: [deu-eng], dataset: parallel-pairs}
  tokenizer: {vocab: 1000, kind: bpe}
name: tiny
seed: 1
";
    assert_eq!(fp("b.yaml", reordered), a);
    let changed = VALID.replace("lr: 0.001", "lr: 0.002");
    assert_ne!(fp("c.yaml", &changed), a);
    // Which report tables are rendered changes no number: not fingerprinted.
    let with_report = format!("{VALID}report: [laser-xnli]\n");
    assert_eq!(fp("e.yaml", &with_report), a);
    // The profile applied is part of what is fingerprinted.
    let p = write(dir.path(), "d.yaml", VALID);
    let big = recipe::load_with(
        &p,
        &LoadOptions {
            profile: Some("big".into()),
            sets: vec![],
        },
        &known(),
    )
    .unwrap();
    assert_ne!(big.fingerprint, a);
}

#[test]
fn evaluation_recipes_need_no_tasks_but_trainable_encoders_do() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "eval.yaml",
        "name: e\nmodel:\n  encoder: {kind: pretrained, name: multilingual-e5-small}\nevaluate: [all]\n",
    );
    recipe::load_with(&p, &LoadOptions::default(), &known()).unwrap();
    let p = write(
        dir.path(),
        "untrained.yaml",
        "name: u\nmodel:\n  encoder: {kind: bilstm}\nevaluate: [xnli]\n",
    );
    let e = only(&problems(&p, &LoadOptions::default()), "tasks");
    assert!(e.message.contains("must be trained"), "{e}");
    let p = write(
        dir.path(),
        "pre.yaml",
        "name: e\nmodel:\n  encoder: {kind: pretrained, name: multilingual-e5-smal}\n",
    );
    let e = only(&problems(&p, &LoadOptions::default()), "model.encoder.name");
    assert_eq!(e.suggestion.as_deref(), Some("multilingual-e5-small"));
}

#[test]
fn steps_and_epochs_are_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let text = VALID.replace("steps: 10,", "steps: 10, epochs: 2,");
    let p = write(dir.path(), "both.yaml", &text);
    let both = only(&problems(&p, &LoadOptions::default()), "train.epochs");
    // A profile's `epochs` under a `--set train.steps` is the usual way in: name the way out.
    assert!(
        both.message.contains("--set train.epochs=null"),
        "{}",
        both.message
    );
    let text = VALID.replace("steps: 10,", "");
    let p = write(dir.path(), "neither.yaml", &text);
    only(&problems(&p, &LoadOptions::default()), "train");
}

#[test]
fn zero_steps_is_the_untrained_baseline_and_zero_epochs_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "zero.yaml",
        &VALID.replace("steps: 10,", "steps: 0,"),
    );
    let r = recipe::load_with(&p, &LoadOptions::default(), &known()).unwrap();
    assert_eq!(r.recipe.train.as_ref().unwrap().steps, Some(0));
    let text = VALID.replace("steps: 10,", "epochs: 0,");
    let p = write(dir.path(), "zero-epochs.yaml", &text);
    only(&problems(&p, &LoadOptions::default()), "train.epochs");
}

/// A `base:` may name any file (an untrusted recipe: `base: /etc/shadow`). Until the file
/// reads as a recipe its problems give the key, the path and the line, never its text:
/// not a line of a YAML mapping of odd keys (a shadow file parses as one), of YAML that is
/// no recipe, of YAML the parser rejects (its message would quote a repeated key), nor of
/// bytes that are not text. A base that is a recipe with a typo still gets its line and a
/// suggestion; a FIFO is refused, not read (the read would wait forever).
#[test]
fn a_base_that_is_not_a_recipe_is_refused_without_showing_its_text() {
    const SECRET: &str = "S3cr3tH4sh";
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>); 5] = [
        (
            "shadow",
            format!("root:$6${SECRET}:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n").into(),
        ),
        (
            "settings.yaml",
            format!("password: {SECRET}\n{SECRET}_user: admin\n").into(),
        ),
        (
            "repeated.yaml",
            format!("{SECRET}: 1\n{SECRET}: 2\n").into(),
        ),
        ("unclosed.yaml", format!("a: [{SECRET}\n").into()),
        (
            "binary",
            [b"\x7fELF\x00\xff\xfe".as_slice(), SECRET.as_bytes()].concat(),
        ),
    ];
    for (name, bytes) in cases {
        let target = dir.path().join(name);
        std::fs::write(&target, bytes).unwrap();
        let r = write(
            dir.path(),
            "r.yaml",
            &format!("name: r\nbase: {}\n", target.display()),
        );
        let ps = problems(&r, &LoadOptions::default());
        let all = ps
            .iter()
            .map(Problem::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            !all.contains(SECRET),
            "{name}: the file's text is shown: {all}"
        );
        assert!(
            all.contains(&target.display().to_string())
                && all.contains("base:")
                && all.contains("Fix:"),
            "{name}: the path and the key: {all}"
        );
        if name != "binary" {
            assert!(
                all.contains("r.yaml:2"),
                "{name}: the line naming it: {all}"
            );
        }
    }

    // A real base with a typo: its line and a suggestion, the key itself not shown.
    let typo = write(dir.path(), "typo.yaml", "name: t\nmodle: {}\n");
    let r = write(dir.path(), "r.yaml", "base: typo.yaml\n");
    let ps = problems(&r, &LoadOptions::default());
    assert_eq!(ps.len(), 1, "{ps:#?}");
    assert_eq!((&ps[0].file, ps[0].line), (&typo, Some(2)));
    assert_eq!(ps[0].suggestion.as_deref(), Some("model"));
    assert!(!ps[0].to_string().contains("modle"), "{}", ps[0]);
    // The recipe the user names is theirs: its own typo is shown as written.
    let own = write(dir.path(), "own.yaml", "name: o\nmodle: {}\n");
    let ps = problems(&own, &LoadOptions::default());
    assert!(
        ps.iter().any(|p| p.to_string().contains("modle")),
        "{ps:#?}"
    );

    #[cfg(unix)]
    {
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let r = write(dir.path(), "r.yaml", "name: r\nbase: fifo\n");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(problems(&r, &LoadOptions::default())));
        let ps = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("a FIFO named by `base:` was opened for reading (blocks)");
        assert!(
            ps[0].key == "base" && ps[0].message.contains("not a regular file"),
            "{ps:#?}"
        );
    }
}

#[test]
fn yaml_syntax_errors_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "syntax.yaml", "name: x\nmodel: {encoder: [\n");
    let e = problems(&p, &LoadOptions::default());
    assert!(e[0].message.contains("not valid YAML"), "{e:#?}");
    assert!(e[0].line.is_some());
}

/// Dataset names from the shared folder when present (the lock may still be empty).
fn known_with_shared_datasets() -> Known {
    let mut k = harness_bench::known().unwrap();
    let dir = harness_core::shared_datasets_dir();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        k.datasets = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
    }
    k
}

#[test]
fn every_recipe_in_the_recipes_directory_validates_with_every_profile() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let known = known_with_shared_datasets();
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        count += 1;
        if let Err(ps) = recipe::validate(&path, &LoadOptions::default(), &known) {
            let shown: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
            panic!("{} is invalid:\n{}", path.display(), shown.join("\n"));
        }
    }
    assert!(count >= 5, "the five paper recipes at least");
}

/// docs/devices.md "Sizes for a GPU": every trained recipe's `gpu` profile is its default
/// with batches 16× larger and the same steps.
#[test]
fn every_trained_recipe_has_a_gpu_profile_with_batches_sixteen_times_the_defaults() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let known = known_with_shared_datasets();
    let load = |file: &str, profile: Option<&str>| {
        let options = LoadOptions {
            profile: profile.map(String::from),
            sets: vec![],
        };
        recipe::load_with(&dir.join(file), &options, &known)
            .unwrap_or_else(|e| panic!("{file} {profile:?}: {e:?}"))
            .recipe
            .train
            .unwrap()
    };
    for file in [
        "laser.yaml",
        "seq2seq-similarity.yaml",
        "muse-xling.yaml",
        "xnli-align.yaml",
        "emu.yaml",
    ] {
        let (default, gpu) = (load(file, None), load(file, Some("gpu")));
        let times16 = |x: Option<u32>| x.map(|n| 16 * n);
        assert_eq!(gpu.batch_tokens, times16(default.batch_tokens), "{file}");
        assert_eq!(gpu.batch_size, times16(default.batch_size), "{file}");
        assert!(gpu.batch_tokens.or(gpu.batch_size).is_some(), "{file}");
        assert_eq!(gpu.steps, default.steps, "{file}");
    }
}

#[test]
fn paper_recipes_carry_paper_profiles_with_the_papers_values() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let known = known_with_shared_datasets();
    let paper = LoadOptions {
        profile: Some("paper".into()),
        sets: vec![],
    };
    let laser = recipe::load_with(&dir.join("laser.yaml"), &paper, &known).unwrap();
    match &laser.recipe.model.as_ref().unwrap().encoder {
        recipe::schema::Encoder::Bilstm(b) => {
            assert_eq!((b.layers, b.hidden, b.embed), (5, 512, 320))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(laser.recipe.train.as_ref().unwrap().epochs, Some(17));
    // §3: Adam at a constant 0.001, no clipping (the default profile takes more).
    let optimizer = laser.recipe.optimizer.as_ref().unwrap();
    assert_eq!((optimizer.lr, optimizer.grad_clip), (0.001, None));
    // §3: translation only; the default's autoencoding and similarity loss are not LASER's.
    assert_eq!(laser.recipe.tasks.len(), 2);
    for task in &laser.recipe.tasks {
        assert_eq!(task.objective.name(), "seq2seq_ce");
        // Left out when 0 (typed with its defaults, `autoencode` is skipped at 0).
        assert_eq!(task.objective.params.get("autoencode"), None, "{task:?}");
    }
    for (file, profiles) in [
        (
            "laser.yaml",
            &[
                "paper",
                "layers-1",
                "layers-3",
                "layers-5",
                "nli",
                "languages-subset",
            ][..],
        ),
        ("muse-xling.yaml", &["paper"][..]),
        ("xnli-align.yaml", &["paper", "x-bilstm-last", "x-cbow"][..]),
        ("seq2seq-similarity.yaml", &["paper", "alpha-0"][..]),
        (
            "emu.yaml",
            &["paper", "no-ld", "no-ld-cl", "no-l2", "atis"][..],
        ),
    ] {
        let names = recipe::profile_names(&dir.join(file));
        for p in profiles {
            assert!(names.iter().any(|n| n == p), "{file} lacks profile `{p}`");
        }
    }
    let a0 = recipe::load_with(
        &dir.join("seq2seq-similarity.yaml"),
        &LoadOptions {
            profile: Some("alpha-0".into()),
            sets: vec![],
        },
        &known,
    )
    .unwrap();
    let sim = a0
        .recipe
        .tasks
        .iter()
        .find(|t| t.name == "similarity")
        .unwrap();
    assert_eq!(sim.objective.name(), "l2_similarity");
    assert_eq!(sim.objective.params["alpha"].as_f64(), Some(0.0));
}

#[test]
fn validate_command_exits_0_when_all_valid_and_1_when_any_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.yaml", VALID);
    let bad = write(
        dir.path(),
        "bad.yaml",
        &VALID.replace("lr: 0.001", "lr: -0.1"),
    );
    let run = |args: &[&str]| {
        let mut argv = vec!["harness", "validate"];
        argv.extend_from_slice(args);
        harness::cli::run(harness::cli::Cli::parse_from(argv)).unwrap()
    };
    let g = good.to_str().unwrap();
    let b = bad.to_str().unwrap();
    assert_eq!(run(&[g]), ExitCode::SUCCESS);
    assert_eq!(
        run(&["--resolved", g, "--profile", "big"]),
        ExitCode::SUCCESS
    );
    assert_eq!(run(&[g, b]), ExitCode::from(1));
    assert_eq!(run(&[g, "--set", "train.steps=-1"]), ExitCode::from(1));
}

#[test]
fn resolved_yaml_loads_back_to_the_same_fingerprint() {
    // Run directories keep `recipe.resolved.yaml`; it must be a recipe in its own right.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
    let known = known_with_shared_datasets();
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let mut profiles: Vec<Option<String>> = vec![None];
        profiles.extend(recipe::profile_names(&path).into_iter().map(Some));
        for profile in profiles {
            let opts = LoadOptions {
                profile: profile.clone(),
                sets: vec![],
            };
            let r = recipe::load_with(&path, &opts, &known).unwrap();
            let again = write(tmp.path(), "resolved.yaml", &r.to_yaml().unwrap());
            let r2 = recipe::load_with(&again, &LoadOptions::default(), &known)
                .unwrap_or_else(|e| panic!("{} {profile:?}: {e}", path.display()));
            assert_eq!(
                r2.fingerprint,
                r.fingerprint,
                "{} {profile:?}",
                path.display()
            );
        }
    }
}

#[test]
fn best_per_language_needs_a_benchmark_path_and_one_language_per_encoder() {
    let dir = tempfile::tempdir().unwrap();
    let with = |key: &str| {
        VALID.replace(
            "batch_tokens: 500}",
            &format!("batch_tokens: 500, best_per_language: {key}}}"),
        )
    };
    // No `model.languages`: nothing to select.
    let p = write(dir.path(), "none.yaml", &with("xnli.accuracy"));
    let e = only(
        &problems(&p, &LoadOptions::default()),
        "train.best_per_language",
    );
    assert!(e.message.contains("model.languages"), "{e}");
    // Two languages through one encoder.
    let shared = with("xnli.accuracy").replace(
        "  decoder:",
        "  encoders:\n    xx: {kind: bilstm, layers: 1, hidden: 32, embed: 16, pool: max}\n  languages: {fr: xx, de: xx}\n  decoder:",
    );
    let p = write(dir.path(), "shared.yaml", &shared);
    let e = only(
        &problems(&p, &LoadOptions::default()),
        "train.best_per_language",
    );
    assert!(e.message.contains("reads both"), "{e}");
    // A benchmark alone, or an unknown one, is no path to a score per language.
    for bad in ["xnli", "xnl.accuracy"] {
        let text = with(bad).replace(
            "  decoder:",
            "  encoders:\n    xx: {kind: bilstm, layers: 1, hidden: 32, embed: 16, pool: max}\n  languages: {fr: xx}\n  decoder:",
        );
        let p = write(dir.path(), "bad.yaml", &text);
        let e = only(
            &problems(&p, &LoadOptions::default()),
            "train.best_per_language",
        );
        assert!(
            e.message.contains("<benchmark>.<scores path>"),
            "{bad}: {e}"
        );
    }
}
