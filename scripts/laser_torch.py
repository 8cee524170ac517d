#!/usr/bin/env python3
"""PyTorch reference of harness's trained BiLSTM/LSTM sentence encoders (LASER and the other
`bilstm`/`lstm` recipes): loads a folder written by `harness export RUN_DIR --out DIR` and
encodes sentences exactly as `harness embed --encoder RUN_DIR` does (tested by
tests/torch_parity.rs: max abs difference <= 1e-5, cosine >= 0.99999 per row).

    python3 scripts/laser_torch.py embed --model DIR --input X.txt --out X.npy
    python3 scripts/laser_torch.py --setup-only

`--input` is read as harness reads it: UTF-8, one sentence per line (`\\n`, a trailing `\\r`
dropped, one final newline ignored, empty lines kept). `--out` is a float32 .npy matrix, one
row per line in input order. The first run makes the venv of scripts/pyenv.py; the script
re-runs itself inside it. As a module (inside that venv):

    from laser_torch import load_export
    encoder, tokenizer = load_export("DIR")
    vectors = encoder.encode_sentences(["Hello world.", "Hallo Welt."], tokenizer)

The export folder
-----------------
- `tokenizer.json`: the run's Hugging Face `tokenizers` file. Fixed ids: `<pad>` 0, `<unk>` 1,
  `<s>` 2, `</s>` 3, then one `<lang:xxx>` token per training language (sorted), then the
  learned subwords (byte-level BPE, or unigram for `sentencepiece` recipes).
- `config.json`: `architecture` ("harness-bilstm"), `n_vocab`, `d_embed`, `layers` (bottom
  first: `{"d_hidden", "bidirectional"}`), `pool` (max | mean | last | cls), `d_sentence`,
  and, for people, `input`, `gates`, `checkpoint` (the run's checkpoint it came from),
  `recipe` (its name).
- `.harness-files.json`: harness's list of the files it wrote there (so that a later export
  may replace them); not needed to load the encoder.
- `encoder.safetensors`: float32 tensors (burn 0.21's SafetensorsStore; metadata `producer:
  burn`, `harness_recipe: <name>`). With H_i the hidden size of layer i, d_in_0 = d_embed and
  d_in_{i+1} = H_i x (2 if layer i is bidirectional else 1):

      embedding.weight            [n_vocab, d_embed]    token embeddings
      forward.{i}.input.weight    [d_in_i, 4*H_i]       input -> the four gates
      forward.{i}.input.bias      [4*H_i]               the gates' bias (the only one)
      forward.{i}.hidden.weight   [H_i, 4*H_i]          previous h -> the four gates, no bias
      reverse.{i}.input.weight    [d_in_i, 4*H_i]       the same for the right-to-left
      reverse.{i}.input.bias      [4*H_i]               direction, present only for
      reverse.{i}.hidden.weight   [H_i, 4*H_i]          bidirectional layers

  Weights are stored [d_in, d_out] (burn's Linear: y = x W + b), the transpose of
  PyTorch's. The 4*H axis holds the gates in PyTorch's order [input, forget, cell (g),
  output], so `nn.LSTM` takes weight_ih = input.weight.T, weight_hh = hidden.weight.T,
  bias_ih = input.bias, bias_hh = 0. Each step: g = x W_in + b + h W_hid;
  i, f, c~, o = split(g, 4); c = sigmoid(f) c + sigmoid(i) tanh(c~); h = sigmoid(o) tanh(c).

What the vector is
------------------
A sentence's input is its tokenizer ids (`encode(text, add_special_tokens=False)`, no
normalisation beyond the file's own), clipped to 256 tokens, followed by `</s>` (id 3), so it
is never empty. Batches are right-padded with id 0; padding never reaches a real position:
each layer runs left-to-right over the real tokens and, if bidirectional, right-to-left
starting from a zero state at the last real token (what packed sequences do); a layer's
output at a position is [forward h ; reverse h], the next layer's input. The sentence vector
(`d_sentence` = the top layer's H x directions) pools the top layer's outputs over the real
positions: `max` (element-wise maximum; LASER), `mean` (sum / number of tokens incl. `</s>`),
`last` ([final forward h (at the last real token) ; final reverse h (at the first token)]),
`cls` (the output at the first position). No normalisation. Dropout is training only.
"""

import os
import sys
from pathlib import Path

PACKAGES = ["torch", "safetensors", "tokenizers", "numpy"]

if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in scripts/
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyenv

    pyenv.activate(PACKAGES, setup_only="--setup-only" in sys.argv[1:])

import json  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

# harness: crates/model/src/trained.rs EVAL_MAX_LEN and BATCH; crates/data/src/tokenize.rs ids.
EVAL_MAX_LEN = 256
BATCH = 64
PAD = 0
EOS = 3


def read_sentences(path) -> list:
    """The lines of a UTF-8 file as harness's `read_sentences` splits them."""
    text = Path(path).read_bytes().decode("utf-8")
    if text == "":
        return []
    body = text[:-1] if text.endswith("\n") else text
    return [line[:-1] if line.endswith("\r") else line for line in body.split("\n")]


def load_tokenizer(path):
    """A `tokenizer.json` as harness uses it: no truncation or padding of its own."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def token_rows(tokenizer, sentences, max_len=EVAL_MAX_LEN) -> list:
    """Encoder inputs: subword ids clipped to `max_len`, then `</s>`."""
    encodings = tokenizer.encode_batch(list(sentences), add_special_tokens=False)
    return [e.ids[:max_len] + [EOS] for e in encodings]


def pad_rows(rows):
    """Right-padded `[batch, time]` ids (0 after the end) and the lengths `[batch]`."""
    width = max(1, max((len(r) for r in rows), default=0))
    ids = torch.full((len(rows), width), PAD, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    return ids, lengths


class HarnessEncoder(nn.Module):
    """Embedding -> stacked (Bi)LSTM layers over the real tokens -> pooling (see the module
    docstring). `layers` is `[(d_hidden, bidirectional), ...]`, bottom first."""

    def __init__(self, n_vocab, d_embed, layers, pool="max", dropout=0.0):
        super().__init__()
        if pool not in ("max", "mean", "last", "cls"):
            raise ValueError(f"unknown pooling {pool!r}")
        self.embedding = nn.Embedding(n_vocab, d_embed)
        self.lstms = nn.ModuleList()
        self.pool = pool
        self.dropout = dropout
        d_in = d_embed
        for d_hidden, bidirectional in layers:
            self.lstms.append(nn.LSTM(d_in, d_hidden, batch_first=True, bidirectional=bidirectional))
            d_in = d_hidden * (2 if bidirectional else 1)
        self.d_sentence = d_in

    def forward(self, ids, lengths):
        """`ids: [batch, time]` right-padded, `lengths: [batch]` (>= 1) -> `[batch, d]`."""
        batch, time = ids.shape
        x = nn.functional.dropout(self.embedding(ids), self.dropout, self.training)
        mask = torch.arange(time).unsqueeze(0) < lengths.unsqueeze(1)  # [batch, time]
        lengths_cpu = lengths.cpu()
        h_n = None
        for i, lstm in enumerate(self.lstms):
            packed = pack_padded_sequence(x, lengths_cpu, batch_first=True, enforce_sorted=False)
            out, (h_n, _) = lstm(packed)
            x, _ = pad_packed_sequence(out, batch_first=True, total_length=time)
            if i + 1 < len(self.lstms):
                x = nn.functional.dropout(x, self.dropout, self.training)
        states = x * mask.unsqueeze(2).to(x.dtype)
        if self.pool == "max":
            return states.masked_fill(~mask.unsqueeze(2), float("-inf")).max(dim=1).values
        if self.pool == "mean":
            return states.sum(dim=1) / lengths.unsqueeze(1).to(x.dtype)
        if self.pool == "cls":
            return states[:, 0]
        # last: the final state of each direction (harness: no layers -> the sum of states)
        if h_n is None:
            return states.sum(dim=1)
        return torch.cat(list(h_n), dim=1)

    def load_harness_tensors(self, tensors: dict) -> None:
        """Copies `encoder.safetensors` tensors (burn layout) into this module."""
        expected = {"embedding.weight"}
        with torch.no_grad():
            self.embedding.weight.copy_(tensors["embedding.weight"])
            for i, lstm in enumerate(self.lstms):
                sides = [("forward", "")] + ([("reverse", "_reverse")] if lstm.bidirectional else [])
                for name, suffix in sides:
                    p = f"{name}.{i}"
                    expected |= {f"{p}.input.weight", f"{p}.input.bias", f"{p}.hidden.weight"}
                    getattr(lstm, f"weight_ih_l0{suffix}").copy_(tensors[f"{p}.input.weight"].t())
                    getattr(lstm, f"bias_ih_l0{suffix}").copy_(tensors[f"{p}.input.bias"])
                    getattr(lstm, f"weight_hh_l0{suffix}").copy_(tensors[f"{p}.hidden.weight"].t())
                    getattr(lstm, f"bias_hh_l0{suffix}").zero_()
        unused = sorted(set(tensors) - expected)
        if unused:
            raise ValueError(f"encoder.safetensors has tensors this configuration does not use: {unused}")

    @torch.no_grad()
    def encode_rows(self, rows, batch_size=BATCH):
        """Vectors `[n, d]` (float32) of encoder input rows, in their order. Rows are sorted
        by length and batched as harness does; batching does not change a vector."""
        was = self.training
        self.eval()
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out = torch.empty((len(rows), self.d_sentence), dtype=torch.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            ids, lengths = pad_rows([rows[i] for i in idx])
            out[torch.tensor(idx)] = self(ids, lengths).float()
        self.train(was)
        return out

    def encode_sentences(self, sentences, tokenizer, batch_size=BATCH):
        """Vectors `[n, d]` of sentences, as `harness embed` computes them."""
        return self.encode_rows(token_rows(tokenizer, sentences), batch_size)


def load_export(folder):
    """`(HarnessEncoder, tokenizers.Tokenizer)` of a `harness export` folder."""
    from safetensors.torch import load_file

    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    if config.get("architecture") != "harness-bilstm":
        raise ValueError(f"{folder / 'config.json'}: architecture {config.get('architecture')!r}, "
                         "expected 'harness-bilstm'")
    layers = [(int(l["d_hidden"]), bool(l["bidirectional"])) for l in config["layers"]]
    model = HarnessEncoder(int(config["n_vocab"]), int(config["d_embed"]), layers, config["pool"])
    model.load_harness_tensors(load_file(str(folder / "encoder.safetensors")))
    if model.d_sentence != int(config["d_sentence"]):
        raise ValueError(f"config.json: d_sentence {config['d_sentence']} but the layers give {model.d_sentence}")
    tokenizer = load_tokenizer(folder / "tokenizer.json")
    if tokenizer.get_vocab_size(with_added_tokens=True) != model.embedding.num_embeddings:
        raise ValueError("tokenizer.json and encoder.safetensors disagree on the vocabulary size")
    model.eval()
    return model, tokenizer


def save_npy(path, matrix) -> None:
    import numpy as np

    np.save(str(path), np.ascontiguousarray(matrix.numpy(), dtype=np.float32))


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setup-only", action="store_true", help="create the venv and exit")
    sub = ap.add_subparsers(dest="command")
    e = sub.add_parser("embed", help="encode a sentence file into a float32 .npy matrix")
    e.add_argument("--model", type=Path, required=True, help="a `harness export` folder")
    e.add_argument("--input", type=Path, required=True, help="UTF-8, one sentence per line")
    e.add_argument("--out", type=Path, required=True, help="the .npy file to write")
    e.add_argument("--batch-size", type=int, default=BATCH)
    e.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if args.command != "embed":
        ap.print_help(sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    model, tokenizer = load_export(args.model)
    sentences = read_sentences(args.input)
    vectors = model.encode_sentences(sentences, tokenizer, args.batch_size)
    save_npy(args.out, vectors)
    print(f"embedded {len(sentences)} sentences ({model.d_sentence}-d) into {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    sys.exit(main())
