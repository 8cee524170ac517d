#!/usr/bin/env python3
"""Encodes sentences with sentence-transformers from a model folder: what a user of a folder
written by `harness export RUN_DIR --out DIR` (a fine-tuned pretrained encoder) does with it.
tests/st_export.rs compares the vectors with `harness embed --encoder RUN_DIR` (cosine
>= 0.9999 per row).

    python3 scripts/st_encode.py --model DIR --input X.txt --out X.npy [--batch-size N]
    python3 scripts/st_encode.py --setup-only

`--input` is read as harness reads it (UTF-8, one sentence per line, a trailing `\\r`
dropped, one final newline ignored). `--out` is a float32 .npy matrix, one row per line,
as `SentenceTransformer(DIR, device="cpu").encode(lines)` returns it: the folder's default
prompt (`config_sentence_transformers.json`) prepended, its pooling and normalisation
applied. The first run makes the venv of scripts/pyenv.py; the script re-runs itself inside.
"""

import sys
from pathlib import Path

PACKAGES = ["torch", "sentence-transformers", "transformers", "tokenizers", "safetensors", "numpy"]

if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in scripts/
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyenv

    pyenv.activate(PACKAGES, setup_only="--setup-only" in sys.argv[1:])

import argparse  # noqa: E402

import numpy as np  # noqa: E402


def read_sentences(path) -> list:
    """The lines of a UTF-8 file as harness's `read_sentences` splits them."""
    text = Path(path).read_bytes().decode("utf-8")
    if text == "":
        return []
    body = text[:-1] if text.endswith("\n") else text
    return [line[:-1] if line.endswith("\r") else line for line in body.split("\n")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(args.model, device="cpu")
    vectors = model.encode(
        read_sentences(args.input), batch_size=args.batch_size, convert_to_numpy=True
    )
    np.save(args.out, np.asarray(vectors, dtype=np.float32))


if __name__ == "__main__":
    main()
