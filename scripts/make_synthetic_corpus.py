#!/usr/bin/env python3
"""A synthetic parallel corpus of any size, for measuring harness at the papers' scale.

Repeats the shipped Tatoeba pairs (../shared/datasets/parallel-pairs, manythings files:
English first, then the other language) and perturbs every copy after the first so that
no two lines are equal: each side of copy k gets one of a few seeded edits (a word dropped,
two neighbouring words swapped, a word repeated, the copy number appended). The text is
not meant to teach anything new; it has the shape of a real corpus (lengths, scripts,
language mix) at 1 M, 10 M or 50 M pairs. Nothing it writes is committed.

    python3 scripts/make_synthetic_corpus.py --pairs 10000000 --out corpora/synthetic
    python3 scripts/make_synthetic_corpus.py --pairs 1000000 --format moses --compress gz ...

Output, one file (tsv) or two (moses) per language pair, named so that harness reads the
languages from the names: `synthetic.deu-eng.tsv` (source, tab, target) or
`synthetic.deu-eng.deu` + `synthetic.deu-eng.eng`. The pairs are spread over the languages
in proportion to the shipped files (capped per language by --languages).
"""

import argparse
import gzip
import os
import random
import sys

LANGUAGES = ["deu", "fra", "spa", "cmn", "tur", "ara"]


def read_pairs(shared, lang):
    path = os.path.join(shared, "parallel-pairs", f"{lang}-eng", f"{lang}.txt.gz")
    if not os.path.exists(path):
        path = path[: -len(".gz")]
        opener = open
    else:
        opener = gzip.open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 2 and cols[0].strip() and cols[1].strip():
                # manythings: English first; a pair is (xx, eng).
                out.append((cols[1].strip(), cols[0].strip()))
    return out


def perturb(sentence, k, rng):
    if k == 0:
        return sentence
    words = sentence.split(" ")
    edit = rng.randrange(4)
    if edit == 0 and len(words) > 2:
        del words[rng.randrange(len(words))]
    elif edit == 1 and len(words) > 1:
        i = rng.randrange(len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    elif edit == 2:
        i = rng.randrange(len(words))
        words.insert(i, words[i])
    return " ".join(words) + f" {k}"


def opener(path, compress):
    if compress == "gz":
        return gzip.open(path + ".gz", "wt", encoding="utf-8", compresslevel=1)
    if compress == "zst":
        import zstandard  # pip install zstandard

        return zstandard.open(path + ".zst", "wt", encoding="utf-8")
    return open(path, "w", encoding="utf-8")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, required=True, help="pairs in all")
    ap.add_argument("--out", required=True, help="folder to write (created)")
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared", "datasets"))
    ap.add_argument("--format", choices=["tsv", "moses"], default="tsv")
    ap.add_argument("--compress", choices=["none", "gz", "zst"], default="none")
    ap.add_argument("--languages", default=",".join(LANGUAGES))
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    langs = args.languages.split(",")
    base = {l: read_pairs(args.shared, l) for l in langs}
    total_base = sum(len(v) for v in base.values())
    os.makedirs(args.out, exist_ok=True)
    written = 0
    for i, lang in enumerate(langs):
        # The last language takes the rounding.
        n = (
            args.pairs - written
            if i == len(langs) - 1
            else args.pairs * len(base[lang]) // total_base
        )
        rng = random.Random(args.seed * 1000 + i)
        stem = os.path.join(args.out, f"synthetic.{lang}-eng")
        if args.format == "tsv":
            outs = [opener(stem + ".tsv", args.compress)]
        else:
            outs = [opener(f"{stem}.{lang}", args.compress), opener(f"{stem}.eng", args.compress)]
        pairs = base[lang]
        for j in range(n):
            src, tgt = pairs[j % len(pairs)]
            k = j // len(pairs)
            src, tgt = perturb(src, k, rng), perturb(tgt, k, rng)
            if args.format == "tsv":
                outs[0].write(f"{src}\t{tgt}\n")
            else:
                outs[0].write(src + "\n")
                outs[1].write(tgt + "\n")
        for o in outs:
            o.close()
        written += n
        print(f"{lang}-eng: {n} pairs", file=sys.stderr)
    print(f"{written} pairs in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
