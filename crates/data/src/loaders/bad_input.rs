//! Bad input for every loader (issue 34, "Bad input"): each loader gets a minimal valid
//! dataset folder in a temporary directory, laid out with the real file names, and must load
//! it; then every file of it is replaced, one at a time, by a broken variant:
//!
//! - truncated in the middle of a line (plain) and in the middle of its gzip stream (`.gz`);
//! - empty (0 bytes);
//! - in the wrong encoding: Latin-1 bytes (`é` as 0xE9) and UTF-16LE with a byte-order mark;
//! - with the wrong column count: one line with its last column dropped, one with an extra;
//! - binary: seeded random bytes, NULs included.
//!
//! The loader must not panic and must return an error naming the file (and the line, for the
//! encoding and column variants, which break one known line), unless the format genuinely
//! tolerates the change: each such case is listed with its reason in the loader's `ok`.
//! `cargo test -p harness-data --lib loaders::bad_input -- --nocapture` prints the counts.

use super::test_support::gzip;
use super::*;
use crate::records::Split;
use crate::DataError;
use std::fmt::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// One kind of broken file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bad {
    TruncatedLine,
    TruncatedGz,
    Empty,
    Latin1,
    Utf16,
    MissingColumn,
    ExtraColumn,
    Binary,
}

const ALL: [Bad; 8] = [
    Bad::TruncatedLine,
    Bad::TruncatedGz,
    Bad::Empty,
    Bad::Latin1,
    Bad::Utf16,
    Bad::MissingColumn,
    Bad::ExtraColumn,
    Bad::Binary,
];

/// A file of a valid dataset folder.
struct File {
    /// Path inside the dataset folder, as the loader names it (without `.gz`).
    rel: &'static str,
    text: String,
    /// The column separator, for files with columns (the column variants need one).
    sep: Option<char>,
    /// The 1-based line the column variants break (a record line, not a header).
    col_line: usize,
}

fn plain(rel: &'static str, text: &str) -> File {
    File {
        rel,
        text: text.to_string(),
        sep: None,
        col_line: 0,
    }
}

fn columns(rel: &'static str, text: &str, sep: char, col_line: usize) -> File {
    File {
        sep: Some(sep),
        col_line,
        ..plain(rel, text)
    }
}

type Load = Box<dyn Fn(&Path) -> Result<usize, DataError>>;

/// One loader: its valid folder, how to call it (returning a record count), and the
/// variants it may load without an error, each with the reason.
struct Case {
    name: &'static str,
    files: Vec<File>,
    load: Load,
    ok: Vec<(&'static str, Bad, &'static str)>,
}

/// Truncation inside a free-text field leaves a well-formed, shorter file: nothing in these
/// formats (no record count, no end marker) can tell. `datasets.lock`'s sha256, checked
/// before any loader runs, is what catches it.
const UNDETECTABLE_CUT: &str = "a cut inside the last free-text field leaves a well-formed shorter file; only the lock's sha256 (checked before loading) can tell";
/// SentEval reads these files as Latin-1 (`io.open(..., encoding='latin-1')`).
const LATIN1_FORMAT: &str = "the format is Latin-1, so these are the right bytes";

/// The broken bytes of `file` for `bad`, with the line the error must name (if any); `None`
/// where the variant does not apply (no columns; an ASCII file has no Latin-1 form).
fn mutate(case: &str, file: &File, bad: Bad) -> Option<(Vec<u8>, Option<usize>)> {
    let text = file.text.trim_start_matches('\u{feff}');
    match bad {
        Bad::TruncatedLine => {
            let lines: Vec<&str> = file.text.split_inclusive('\n').collect();
            let m = lines.len() / 2;
            let start: usize = lines[..m].iter().map(|l| l.len()).sum();
            let mut cut = start + lines[m].trim_end_matches('\n').len() / 2;
            while !file.text.is_char_boundary(cut) {
                cut -= 1;
            }
            Some((file.text.as_bytes()[..cut].to_vec(), None))
        }
        Bad::TruncatedGz => {
            let gz = gzip(&file.text);
            Some((gz[..gz.len() / 2].to_vec(), None))
        }
        Bad::Empty => Some((Vec::new(), None)),
        Bad::Latin1 => {
            let line = text.lines().position(|l| !l.is_ascii())? + 1;
            let bytes = text
                .chars()
                .map(|c| u8::try_from(u32::from(c)).expect("test text is Latin-1"))
                .collect();
            Some((bytes, Some(line)))
        }
        Bad::Utf16 => {
            let mut bytes = vec![0xFF, 0xFE];
            bytes.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
            Some((bytes, Some(1)))
        }
        Bad::MissingColumn | Bad::ExtraColumn => {
            let sep = file.sep?;
            let mut lines: Vec<String> = file
                .text
                .split_inclusive('\n')
                .map(str::to_string)
                .collect();
            let line = &mut lines[file.col_line - 1];
            let end = line.trim_end_matches(['\r', '\n']).len();
            let ending = line.split_off(end);
            if bad == Bad::MissingColumn {
                // A one-column line loses its only field: an empty line.
                line.truncate(line.rfind(sep).unwrap_or(0));
            } else {
                line.push(sep);
                line.push_str("extra");
            }
            line.push_str(&ending);
            Some((lines.concat().into_bytes(), Some(file.col_line)))
        }
        Bad::Binary => {
            // splitmix64 seeded by the case and file: the same bytes on every run.
            let mut state = case
                .bytes()
                .chain(file.rel.bytes())
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                });
            let mut bytes = Vec::with_capacity(512);
            for i in 0..512 {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^= z >> 31;
                bytes.push(if i % 37 == 5 { 0 } else { z as u8 });
            }
            Some((bytes, None))
        }
    }
}

/// Whether `msg` names `path` at `line`: `path:line`, or the path and `line N` apart (an
/// error found while reading a line-aligned partner file names both).
fn names_line(msg: &str, path: &str, line: usize) -> bool {
    msg.contains(&format!("{path}:{line}"))
        || (msg.contains(path) && msg.contains(&format!("line {line}")))
}

fn write_folder(dir: &Path, files: &[File]) {
    for f in files {
        let path = dir.join(f.rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &f.text).unwrap();
    }
}

/// Runs every variant of every file of `case`; returns (bad files tried, of them loaded as
/// the format allows, failures).
fn run(case: &Case) -> (usize, usize, Vec<String>) {
    let mut failures = Vec::new();
    let valid = tempfile::tempdir().unwrap();
    write_folder(valid.path(), &case.files);
    match catch_unwind(AssertUnwindSafe(|| (case.load)(valid.path()))) {
        Ok(Ok(n)) if n > 0 => {}
        other => failures.push(format!(
            "{}: the valid folder does not load: {other:?}",
            case.name
        )),
    }
    let (mut tried, mut tolerated) = (0, 0);
    for file in &case.files {
        for bad in ALL {
            let Some((bytes, line)) = mutate(case.name, file, bad) else {
                continue;
            };
            tried += 1;
            let tmp = tempfile::tempdir().unwrap();
            write_folder(tmp.path(), &case.files);
            let mut path: PathBuf = tmp.path().join(file.rel);
            if bad == Bad::TruncatedGz {
                std::fs::remove_file(&path).unwrap();
                path = tmp.path().join(format!("{}.gz", file.rel));
            }
            std::fs::write(&path, &bytes).unwrap();
            let what = format!("{} / {} / {bad:?}", case.name, file.rel);
            let allowed = case
                .ok
                .iter()
                .any(|(rel, b, _)| *rel == file.rel && *b == bad);
            match catch_unwind(AssertUnwindSafe(|| (case.load)(tmp.path()))) {
                Err(_) => failures.push(format!("{what}: PANICKED")),
                Ok(Ok(n)) if !allowed => {
                    failures.push(format!("{what}: loaded {n} records without an error"))
                }
                Ok(Ok(_)) => tolerated += 1,
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    let p = path.display().to_string();
                    if !msg.contains(&p) {
                        failures.push(format!("{what}: the error does not name {p}: {msg}"));
                    } else if let Some(l) = line.filter(|l| !names_line(&msg, &p, *l)) {
                        failures.push(format!("{what}: the error does not name line {l}: {msg}"));
                    }
                }
            }
        }
    }
    (tried, tolerated, failures)
}

/// `n` files `<stem>.<part>` of the same line-aligned text.
fn aligned(names: &[&'static str], lines: &[&str]) -> Vec<File> {
    names
        .iter()
        .map(|n| plain(n, &format!("{}\n", lines.join("\n"))))
        .collect()
}

const ALIGNED: [&str; 3] = ["Première ligne.", "Second line here.", "Third line."];

const CONLL_EN: &str = "# id = 1\n# text = show flights é\n# intent = find_flight\n1\tshow\tfind_flight\tO\n2\tflights\tfind_flight\tO\n3\té\tfind_flight\tO\n\n# id = 2\n# text = play music\n# intent = play_music\n1\tplay\tplay_music\tO\n2\tmusic\tplay_music\tO\n\n";

fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    out.push(Case {
        name: "bucc",
        files: vec![
            columns(
                "zh-en.sample.zh",
                "zh-1\tpremière phrase\nzh-2\tdeuxième phrase\nzh-3\ttroisième phrase\n",
                '\t',
                2,
            ),
            columns(
                "zh-en.sample.en",
                "en-1\tfirst sentence\nen-2\tsecond sentence é\nen-3\tthird sentence\n",
                '\t',
                2,
            ),
            columns(
                "zh-en.sample.gold",
                "zh-1\ten-2\nzh-2\ten-1\nzh-3\ten-3\n",
                '\t',
                2,
            ),
        ],
        load: Box::new(|d| {
            bucc::load_zh_en_sample(d).map(|s| s.source.len() + s.target.len() + s.gold.len())
        }),
        ok: vec![
            (
                "zh-en.sample.zh",
                Bad::ExtraColumn,
                "lines split on their first tab only: a later tab belongs to the sentence (SOURCE.txt)",
            ),
            (
                "zh-en.sample.en",
                Bad::ExtraColumn,
                "lines split on their first tab only: a later tab belongs to the sentence (SOURCE.txt)",
            ),
        ],
    });

    let marc = "1,très bien,5\n2,plain review,2\n3,\"quoted, with comma\",4\n";
    out.push(Case {
        name: "cls_amazon",
        files: vec![
            columns("marc/en/train.csv", marc, ',', 2),
            columns("marc/en/dev.csv", marc, ',', 2),
            columns("marc/en/test.csv", marc, ',', 2),
        ],
        load: Box::new(|d| cls_amazon::load(d, "en").map(|s| s.train.len() + s.test.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "conversation",
        files: vec![plain(
            "valid_freq.json",
            "{\n\"c1\": {\"content\": [{\"message\": \"salut é\", \"agent\": \"agent_1\"},\n {\"message\": \"hello\", \"agent\": \"agent_2\"}]},\n\"c2\": {\"content\": [{\"message\": \"a\"}, {\"message\": \"b\"}]}\n}\n",
        )],
        load: Box::new(|d| conversation::load_pairs(d, &["valid_freq"]).map(|p| p.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "monolingual",
        files: vec![plain(
            "xx/book.txt",
            "Header\n*** START OF THE BOOK ***\nFirst paragraph é\nwrapped here.\n\nSecond one.\n*** END OF THE BOOK ***\nLicence\n",
        )],
        load: Box::new(|d| {
            monolingual::load_all(d).map(|b| b.iter().map(|d| d.paragraphs.len()).sum())
        }),
        ok: vec![],
    });

    out.push(Case {
        name: "multiway (newstest2012)",
        files: aligned(
            &[
                "newstest2012.cs",
                "newstest2012.de",
                "newstest2012.en",
                "newstest2012.es",
                "newstest2012.fr",
            ],
            &ALIGNED,
        ),
        load: Box::new(|d| multiway::load_newstest2012(d).map(|m| m.lines.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "multiway (flores200)",
        files: aligned(&["aaa_Latn.devtest", "bbb_Latn.devtest"], &ALIGNED),
        load: Box::new(|d| multiway::load_flores200(d).map(|m| m.lines.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "parallel_pairs",
        files: vec![columns(
            "abc-eng/abc.txt",
            "Hi.\tSalut é.\nGo.\tVa.\tCC-BY 2.0 (France) Attribution: tatoeba.org\nRun!\tCours !\n",
            '\t',
            3,
        )],
        load: Box::new(|d| parallel_pairs::load_all(d).map(|c| c[0].pairs.len())),
        ok: vec![
            (
                "abc-eng/abc.txt",
                Bad::ExtraColumn,
                "a third column (the per-pair attribution) is part of the format and ignored",
            ),
            ("abc-eng/abc.txt", Bad::TruncatedLine, UNDETECTABLE_CUT),
        ],
    });

    out.push(Case {
        name: "senteval MR",
        files: vec![
            plain("MR/rt-polarity.pos", "a fine film é\nwonderful\n"),
            plain("MR/rt-polarity.neg", "dull\nboring é\n"),
        ],
        load: Box::new(|d| senteval::load(d, senteval::Task::Mr).map(|s| s.train.len())),
        ok: vec![
            ("MR/rt-polarity.pos", Bad::Latin1, LATIN1_FORMAT),
            ("MR/rt-polarity.neg", Bad::Latin1, LATIN1_FORMAT),
            ("MR/rt-polarity.pos", Bad::TruncatedLine, UNDETECTABLE_CUT),
            ("MR/rt-polarity.neg", Bad::TruncatedLine, UNDETECTABLE_CUT),
        ],
    });

    out.push(Case {
        name: "senteval TREC",
        files: vec![
            plain(
                "TREC/train_5500.label",
                "DESC:manner How did serfdom develop in and then leave Russia ?\nENTY:cremat What films featured the character Popeye Doyle é ?\nHUM:ind Who wrote it ?\n",
            ),
            plain(
                "TREC/TREC_10.label",
                "NUM:dist How far is it from Denver to Aspen ?\nLOC:city What county is Modesto é , California in ?\n",
            ),
        ],
        load: Box::new(|d| {
            senteval::load(d, senteval::Task::Trec).map(|s| s.train.len() + s.test.len())
        }),
        ok: vec![
            ("TREC/train_5500.label", Bad::Latin1, LATIN1_FORMAT),
            ("TREC/TREC_10.label", Bad::Latin1, LATIN1_FORMAT),
            ("TREC/train_5500.label", Bad::TruncatedLine, UNDETECTABLE_CUT),
            ("TREC/TREC_10.label", Bad::TruncatedLine, UNDETECTABLE_CUT),
        ],
    });

    let sst2 = "a gripping film é\t1\nflat and dull\t0\nfine\t1\n";
    out.push(Case {
        name: "senteval SST2",
        files: vec![
            columns("SST/binary/sentiment-train", sst2, '\t', 2),
            columns("SST/binary/sentiment-dev", sst2, '\t', 2),
            columns("SST/binary/sentiment-test", sst2, '\t', 2),
        ],
        load: Box::new(|d| senteval::load(d, senteval::Task::Sst2).map(|s| s.train.len())),
        ok: vec![],
    });

    let sst5 = "4 a gripping film é\n0 flat and dull\n2 fine\n";
    out.push(Case {
        name: "senteval SST5",
        files: vec![
            plain("SST/fine/sentiment-train", sst5),
            plain("SST/fine/sentiment-dev", sst5),
            plain("SST/fine/sentiment-test", sst5),
        ],
        load: Box::new(|d| senteval::load(d, senteval::Task::Sst5).map(|s| s.train.len())),
        ok: vec![
            (
                "SST/fine/sentiment-train",
                Bad::TruncatedLine,
                UNDETECTABLE_CUT,
            ),
            (
                "SST/fine/sentiment-dev",
                Bad::TruncatedLine,
                UNDETECTABLE_CUT,
            ),
            (
                "SST/fine/sentiment-test",
                Bad::TruncatedLine,
                UNDETECTABLE_CUT,
            ),
        ],
    });

    let mrpc = "\u{feff}Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t702876\t702977\tAmrozi accused his brother é\tReferring to him\n0\t2108705\t2108831\tYucaipa owned Dominick's\tYucaipa bought Dominick's\n";
    out.push(Case {
        name: "senteval MRPC",
        files: vec![
            columns("MRPC/msr_paraphrase_train.txt", mrpc, '\t', 2),
            columns("MRPC/msr_paraphrase_test.txt", mrpc, '\t', 3),
        ],
        load: Box::new(|d| senteval::load_mrpc(d).map(|s| s.train.len() + s.test.len())),
        ok: vec![],
    });

    let sib =
        "index_id\tcategory\ttext\n1\tscience/technology\tA text é\n2\ttravel\tAnother text\n";
    out.push(Case {
        name: "sib200",
        files: vec![
            plain(
                "eng_Latn/labels.txt",
                "science/technology\ntravel\npolitics\n",
            ),
            columns("eng_Latn/train.tsv", sib, '\t', 2),
            columns("eng_Latn/dev.tsv", sib, '\t', 2),
            columns("eng_Latn/test.tsv", sib, '\t', 3),
        ],
        load: Box::new(|d| sib200::load(d, "eng_Latn").map(|s| s.train.len() + s.test.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "sick",
        files: vec![columns(
            "SICK_train.txt",
            "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n1\tA group of kids é\tA group of boys\t4.5\tNEUTRAL\n2\tA man\tA woman\t3.6\tCONTRADICTION\n",
            '\t',
            2,
        )],
        load: Box::new(|d| sick::load(d, Split::Train).map(|p| p.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "sick (full release)",
        files: vec![columns(
            "SICK.txt",
            "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\tsentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set\n1\tA group of kids é\tA group of boys\tNEUTRAL\t4.5\tA_neutral_B\tB_neutral_A\tkids\tboys\tFLICKR\tFLICKR\tTRAIN\n2\tA man\tA woman\tCONTRADICTION\t3.6\tA_contradicts_B\tB_contradicts_A\tman\twoman\tSEMEVAL\tSEMEVAL\tTEST\n",
            '\t',
            3,
        )],
        load: Box::new(|d| sick::load_full(d).map(|s| s.train.len() + s.test.len())),
        ok: vec![],
    });

    let mut slot = Vec::new();
    for (seq_in, seq_out, label) in [
        ("train/seq.in", "train/seq.out", "train/label"),
        ("valid/seq.in", "valid/seq.out", "valid/label"),
        ("test/seq.in", "test/seq.out", "test/label"),
    ] {
        slot.push(columns(
            seq_in,
            "show flights to paris é\nlist fares\nbook it now\n",
            ' ',
            2,
        ));
        slot.push(columns(seq_out, "O O O B-toloc O\nO O\nO O O\n", ' ', 2));
        slot.push(plain(label, "atis_flight\natis_airfare\natis_booking\n"));
    }
    out.push(Case {
        name: "slot_gated",
        files: slot,
        load: Box::new(|d| slot_gated::load(d).map(|s| s.train.len() + s.test.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "snli",
        files: vec![columns(
            "validation.tsv",
            "premise\thypothesis\tlabel\nA man é plays.\tA person plays.\t0\nA dog runs.\tA cat sleeps.\t2\n",
            '\t',
            2,
        )],
        load: Box::new(|d| snli::load(d, Split::Dev).map(|p| p.len())),
        ok: vec![],
    });

    let unscored =
        "an empty gold line is an unscored pair, skipped as SentEval does (STS15/16 have them)";
    out.push(Case {
        name: "sts12_16 (2012)",
        files: vec![
            columns(
                "STS/STS12-en-test/STS.input.MSRpar.txt",
                "A man é.\tA person.\nTwo dogs.\tDogs.\nA cat.\tThe cat.\n",
                '\t',
                2,
            ),
            columns(
                "STS/STS12-en-test/STS.gs.MSRpar.txt",
                "4.2\n3.0\n5.0\n",
                '\t',
                2,
            ),
        ],
        load: Box::new(|d| sts12_16::load_subset(d, 2012, "MSRpar").map(|p| p.len())),
        ok: vec![(
            "STS/STS12-en-test/STS.gs.MSRpar.txt",
            Bad::MissingColumn,
            unscored,
        )],
    });

    out.push(Case {
        name: "sts12_16 (2016)",
        files: vec![
            columns(
                "STS/STS16-en-test/STS.input.answer-answer.txt",
                "A man é.\tA person.\tsrc-a\tsrc-b\nTwo dogs.\tDogs.\tsrc-a\tsrc-b\nA cat.\tThe cat.\tsrc-a\tsrc-b\n",
                '\t',
                2,
            ),
            columns(
                "STS/STS16-en-test/STS.gs.answer-answer.txt",
                "4.2\n3.0\n5.0\n",
                '\t',
                2,
            ),
        ],
        load: Box::new(|d| sts12_16::load_subset(d, 2016, "answer-answer").map(|p| p.len())),
        ok: vec![(
            "STS/STS16-en-test/STS.gs.answer-answer.txt",
            Bad::MissingColumn,
            unscored,
        )],
    });

    out.push(Case {
        name: "sts17",
        files: vec![
            columns(
                "STS2017.eval.v1.1/STS.input.track5.en-en.txt",
                "A man é.\tA person.\nTwo dogs.\tDogs.\nA cat.\tThe cat.\n",
                '\t',
                2,
            ),
            columns(
                "STS2017.gs/STS.gs.track5.en-en.txt",
                "4.2\n3.0\n5.0\n",
                '\t',
                2,
            ),
        ],
        load: Box::new(|d| {
            let track = sts17::find("5").expect("track 5");
            sts17::load(d, track).map(|p| p.len())
        }),
        ok: vec![(
            "STS2017.gs/STS.gs.track5.en-en.txt",
            Bad::MissingColumn,
            unscored,
        )],
    });

    out.push(Case {
        name: "stsb_multi_mt",
        files: vec![columns(
            "stsb-de-test.csv",
            "Ein Flugzeug é.,Ein Flugzeug hebt ab.,5.0\r\n\"Ein Mann, der\",Ein Mann,3.8\r\nKatze,Hund,0.5\r\n",
            ',',
            3,
        )],
        load: Box::new(|d| stsb_multi_mt::load(d, "de", Split::Test).map(|p| p.len())),
        ok: vec![],
    });

    let stsb = "main-captions\tMSRvid\t2012test\t0001\t5.000\tA plane é is taking off.\tAn air plane is taking off.\nmain-news\theadlines\t2013\t0002\t3.800\tA man.\tA woman.\tsrc\tsrc2\nmain-forums\tdeft\t2014\t0003\t1.0\tX.\tY.\n";
    out.push(Case {
        name: "stsbenchmark",
        files: vec![
            columns("sts-train.csv", stsb, '\t', 3),
            columns("sts-dev.csv", stsb, '\t', 2),
            columns("sts-test.csv", stsb, '\t', 1),
        ],
        load: Box::new(|d| stsbenchmark::load_all(d).map(|s| s.train.len() + s.test.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "tatoeba",
        files: aligned(&["tatoeba.abc-eng.abc", "tatoeba.abc-eng.eng"], &ALIGNED),
        load: Box::new(|d| tatoeba::load_all(d).map(|c| c[0].pairs.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "wmt_news",
        files: aligned(
            &["deu-eng/newstest2019.deu", "deu-eng/newstest2019.eng"],
            &ALIGNED,
        ),
        load: Box::new(|d| wmt_news::load_all(d).map(|c| c[0].pairs.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "xnli",
        files: vec![columns(
            "xnli_validation_de.tsv",
            "id\tpremise\thypothesis\tlabel\n0\tEin Mann é.\tEine Person.\t0\n1\tHund.\tKatze.\t2\n",
            '\t',
            2,
        )],
        load: Box::new(|d| xnli::load(d, "de", Split::Dev).map(|p| p.len())),
        ok: vec![],
    });

    out.push(Case {
        name: "xsid",
        files: vec![
            columns("en.test.conll", CONLL_EN, '\t', 5),
            columns(
                "de.test.conll",
                &CONLL_EN.replace("flights", "Flüge"),
                '\t',
                4,
            ),
            columns(
                "no.test.conll",
                &CONLL_EN
                    .replace("id = 1", "id = 1/1")
                    .replace("id = 2", "id = 2/1"),
                '\t',
                4,
            ),
            columns(
                "de-ba.test.conll",
                &CONLL_EN
                    .replace(
                        "# text = show flights é",
                        "# text = zoag Flüge\n# text-en = show flights é",
                    )
                    .replace(
                        "# text = play music",
                        "# text = spui Musi\n# text-en = play music",
                    ),
                '\t',
                13,
            ),
        ],
        load: Box::new(|d| {
            xsid::load_aligned(d, xsid::Split::Test, &["de", "no", "de-ba"])
                .map(|a| a.pivot.len() + a.langs.values().flatten().map(Vec::len).sum::<usize>())
        }),
        ok: vec![],
    });

    out.push(Case {
        name: "xsid (train-en)",
        files: vec![
            columns(
                "train-en/text.en",
                "show flights é\nplay music\nbook it\n",
                ' ',
                2,
            ),
            columns(
                "train-en/label.en",
                "O O O\tfind_flight\nO O\tplay_music\nO O\tbook\n",
                '\t',
                2,
            ),
        ],
        load: Box::new(|d| xsid::load_train_en(d).map(|t| t.len())),
        ok: vec![],
    });

    out
}

#[test]
fn every_loader_rejects_bad_files_naming_file_and_line() {
    let cases = cases();
    let mut failures = Vec::new();
    let mut report = String::new();
    let (mut total, mut total_ok) = (0, 0);
    for case in &cases {
        let (tried, tolerated, f) = run(case);
        total += tried;
        total_ok += tolerated;
        let _ = writeln!(
            report,
            "  {:<24} {tried:>3} bad files, {:>3} errors, {tolerated} loaded as the format allows",
            case.name,
            tried - tolerated
        );
        failures.extend(f);
    }
    println!(
        "bad input: {total} bad files tried over {} loaders ({} errors naming the file, {total_ok} loaded as the format allows, 0 panics expected):\n{report}",
        cases.len(),
        total - total_ok
    );
    assert!(
        failures.is_empty(),
        "{} of {total} bad files were mishandled:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
