#!/usr/bin/env python3
"""The peer of harness's binarization: Hugging Face `tokenizers` `encode_batch` on the same
`tokenizer.json` and the same tab-separated files, with a given number of threads.

Reads every line of `--files` (source, tab, target), encodes both sides in batches of
`--batch` sentences (the library's own Rayon pool, RAYON_NUM_THREADS threads) and keeps only
the ids (as harness does before writing its shards; nothing is written here). Prints one
line:

    tokenizers: N sentences in S s: R sentences/s (T threads)

harness's `cargo bench --bench corpora` runs it beside `harness corpora` on the same files.
"""

import argparse
import os
import sys
import time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="a run's tokenizer.json")
    ap.add_argument("--files", nargs="+", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    # The library's pool reads this before it starts.
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyenv

    pyenv.activate(["tokenizers"], setup_only=args.setup_only)
    if args.setup_only:
        return
    import json

    from tokenizers import Tokenizer

    # harness saves its tokenizer as {"tokenizer": <the library's JSON>, ...} or the
    # library's JSON itself.
    raw = json.loads(Path(args.tokenizer).read_text(encoding="utf-8"))
    inner = raw.get("tokenizer", raw) if isinstance(raw, dict) else raw
    tok = Tokenizer.from_str(json.dumps(inner))
    sentences = 0
    ids = 0
    start = time.perf_counter()
    batch = []

    def flush():
        nonlocal ids
        for e in tok.encode_batch(batch, add_special_tokens=False):
            ids += len(e.ids)
        batch.clear()

    for path in args.files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                batch.extend(cols[:2])
                sentences += 2
                if len(batch) >= args.batch:
                    flush()
    if batch:
        flush()
    secs = time.perf_counter() - start
    print(
        f"tokenizers: {sentences} sentences in {secs:.2f} s: {sentences / secs:.0f} sentences/s"
        f" ({args.threads} threads, {ids} ids)"
    )


if __name__ == "__main__":
    main()
