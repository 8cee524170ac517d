//! `harness embed` end to end, in-process: parse the command line, encode through the
//! cache, write the `.npy`, and read it back as an `npy:` encoder.

use clap::Parser;
use harness::cli::{run, Cli};
use harness_core::settings::Settings;
use harness_embed::npy::read_npy;
use harness_encoders::embed_file::{embed, EmbedOptions};
use harness_encoders::{open_encoder, Encoder};

fn settings(cache: &std::path::Path) -> Settings {
    Settings {
        cache_dir: cache.to_path_buf(),
        ..Settings::default()
    }
}

#[test]
fn embed_writes_npy_hits_the_cache_and_round_trips_through_npy_encoder() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("sents.txt");
    std::fs::write(
        &input,
        "A man is playing a guitar.\nEin Mann spielt Gitarre.\n\n一个男人在弹吉他。\nA man is playing a guitar.\n",
    )
    .unwrap();
    let out = tmp.path().join("sents.npy");
    let s = settings(&tmp.path().join("cache"));
    let first = embed(
        "hashed-ngrams",
        &input,
        &out,
        &s,
        EmbedOptions {
            batch_size: 2,
            force: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((first.sentences, first.dim), (5, 512));
    let c = first.cache.unwrap();
    assert_eq!((c.hits, c.misses, c.encoded), (0, 5, 4));
    let m1 = read_npy(&out).unwrap();
    // An existing output is replaced only when asked to.
    let err = embed(
        "hashed-ngrams",
        &input,
        &out,
        &s,
        EmbedOptions {
            batch_size: 2,
            force: false,
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("sents.npy") && err.contains("--force"),
        "{err}"
    );
    let second = embed(
        "hashed-ngrams",
        &input,
        &out,
        &s,
        EmbedOptions {
            batch_size: 2,
            force: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(second.cache.unwrap().hits, 5);
    assert_eq!(
        read_npy(&out).unwrap(),
        m1,
        "cached rows differ from fresh ones"
    );
    let direct = open_encoder("hashed-ngrams", &s).unwrap();
    let refs = [
        "A man is playing a guitar.",
        "Ein Mann spielt Gitarre.",
        "",
        "一个男人在弹吉他。",
        "A man is playing a guitar.",
    ];
    assert_eq!(direct.encode(&refs).unwrap(), m1);

    // sents.npy + sents.txt is an `npy:` encoder.
    let spec = format!("npy:{}", out.display());
    let npy = open_encoder(&spec, &s).unwrap();
    assert_eq!(
        npy.encode(&refs[..4]).unwrap(),
        m1.select_rows(&[0, 1, 2, 3])
    );
    let err = npy.encode(&["not there"]).unwrap_err().to_string();
    assert!(
        err.contains("sents.txt") && err.contains("not there"),
        "{err}"
    );
}

#[test]
fn embed_command_parses_and_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.txt");
    std::fs::write(&input, "one\ntwo\n").unwrap();
    let out = tmp.path().join("out.npy");
    let cli = Cli::parse_from([
        "harness",
        "embed",
        "--encoder",
        "hashed-ngrams:dim=32,seed=3",
        "--input",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-cache",
    ]);
    let code = run(cli).unwrap();
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    let m = read_npy(&out).unwrap();
    assert_eq!((m.rows, m.cols), (2, 32));

    let cli = Cli::parse_from([
        "harness",
        "embed",
        "--encoder",
        "hashed-ngramz",
        "--input",
        input.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--no-cache",
    ]);
    let err = run(cli).unwrap_err().to_string();
    assert!(err.contains("did you mean `hashed-ngrams`"), "{err}");
}
