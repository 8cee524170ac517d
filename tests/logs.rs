//! A nightly runs under cron: its stderr is a log file, not a terminal. A cheap `harness eval`
//! with stdout and stderr in one file (`> log 2>&1`) writes a log a person reads: no 0 %
//! lines (`0/…`, `0 B/…`), no line twice in a row, no line per inner classifier, and the end
//! of each unit of work (the dataset's download, the evaluation) as one line.

mod binary;

use binary::command;

#[test]
fn an_eval_into_a_log_file_writes_a_short_readable_log() {
    let home = tempfile::tempdir().unwrap();
    let log_path = home.path().join("log");
    let log = std::fs::File::create(&log_path).unwrap();
    let out = home.path().join("results");
    let status = command(
        home.path(),
        &[
            "eval",
            "--encoder",
            "hashed-ngrams:dim=64",
            "--bench",
            "mr",
            "--set",
            "mr.kfold=2",
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .stdout(log.try_clone().unwrap())
    .stderr(log)
    .status()
    .unwrap();
    let text = std::fs::read_to_string(&log_path).unwrap();
    assert!(status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() < 50, "{} lines:\n{text}", lines.len());
    for l in &lines {
        assert!(
            !l.contains(" 0/") && !l.contains("0 B/"),
            "a 0 % line: {l}\n{text}"
        );
        assert!(
            !l.contains("classifier"),
            "an inner classifier's line: {l}\n{text}"
        );
    }
    for w in lines.windows(2) {
        assert_ne!(w[0], w[1], "the same line twice:\n{text}");
    }
    // The units of work end with one line each (the dataset comes from the configured mirror).
    assert!(
        lines.iter().any(|l| l.starts_with("senteval: done ")),
        "{text}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.starts_with("evaluate: done 1/1 in "))
            .count(),
        1,
        "{text}"
    );
}
