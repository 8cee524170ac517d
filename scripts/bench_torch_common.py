"""What the hand-written PyTorch trainers of harness's recipes share
(`scripts/bench_torch_laser.py`, `scripts/bench_torch_muse.py`, `scripts/bench_torch_xnli.py`,
`scripts/bench_torch_emu.py`):
the resolved recipe, the batches and the task mixture of harness's trainer
(crates/train/src/{data.rs,mixture.rs}), its learning-rate schedule and optimizers
(crates/train/src/optim.rs), the `words` tokenizer (crates/data/src/words.rs), the LSTM and
CBOW sentence encoders, the `mlp` head and the initialisation (crates/model/src/), and the step
loop's bookkeeping (tokens, seconds, losses, the one `pytorch:` line).

Imported by those scripts after `pyenv.activate`; never run on its own.
"""

import argparse
import json
import math
import os
import random
import re
import sys
from pathlib import Path

# harness's fixed ids (crates/data/src/tokenize.rs).
PAD, UNK, BOS, EOS = 0, 1, 2, 3
# Scale of harness's uniform initialisation (crates/model/src/system.rs `INIT_SCALE`).
INIT_SCALE = 0.1
WORDS_PREFIX = "<words:"


def fail(message: str) -> None:
    """Stops the running script with `message` (exit 2)."""
    print(f"{Path(sys.argv[0]).stem}: {message}", file=sys.stderr)
    sys.exit(2)


def num(x, default=None) -> float:
    """A number of the resolved recipe (YAML 1.1 reads `1e-8` as a string)."""
    return default if x is None else float(x)


def load_recipe(run: Path) -> dict:
    import yaml

    path = run / "recipe.resolved.yaml"
    if not path.is_file():
        fail(f"{path}: missing; pass a run directory of `harness train`")
    return yaml.safe_load(path.read_text())


def read_jsonl(path: Path) -> list:
    if not path.is_file():
        fail(f"{path}: missing; train the run with a harness that writes RUN_DIR/corpora/ "
             "(`harness train RECIPE --out RUN_DIR` writes it before training)")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def need(rows, keys, path):
    if rows and not all(k in rows[0] for k in keys):
        fail(f"{path}: expected lines with {', '.join(keys)}")


def learning_rate(opt, step, total, steps_per_epoch) -> float:
    """crates/train/src/optim.rs `learning_rate`."""
    s = opt.get("schedule") or {}
    base, warm = num(opt["lr"]), int(s.get("warmup") or 0)
    if warm > 0 and step < warm:
        return base * (step + 1) / warm
    kind = s.get("kind", "constant")
    if kind == "linear":
        return base * max(0.0, 1.0 - (step - warm) / max(1, total - warm))
    if kind == "inverse_sqrt":
        return base * min(1.0, (max(1, warm) / (step + 1)) ** 0.5)
    if kind == "exponential":
        return base * num(s.get("decay"), 1.0) ** (step // max(1, steps_per_epoch))
    return base


def make_optimizer(spec, params):
    import torch

    kind = spec.get("kind", "adam")
    betas = tuple(num(b) for b in (spec.get("betas") or [0.9, 0.999]))
    eps, wd, lr = num(spec.get("eps"), 1e-8), num(spec.get("weight_decay"), 0.0), num(spec["lr"])
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=wd)
    fail(f"optimizer kind `{kind}` is not part of this trainer")


def update(torch, optimizer, params, loss, clip, lr, scale_grads=None) -> float:
    """One optimizer update on `loss` (trainer.rs `Loop::step` after the loss): backward,
    `scale_grads()` if given, global-norm clipping at `clip` when set, the step's learning
    rate, the optimizer step. The loss's value."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if scale_grads is not None:
        scale_grads()
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(params, num(clip))
    for g in optimizer.param_groups:
        g["lr"] = lr
    optimizer.step()
    return loss.item()


class Meter:
    """What the trainers report: real tokens over the seconds spent in training steps (as
    harness's `session_tokens` / `session_seconds`), the first and the last loss."""

    def __init__(self, log: bool):
        self.log, self.steps, self.tokens, self.seconds = log, 0, 0, 0.0
        self.first_loss = self.last_loss = float("nan")

    def add(self, step: int, task: str, value: float, tokens: int, secs: float) -> None:
        if not math.isfinite(value):
            fail(f"step {step}: task {task} diverged (loss {value})")
        self.first_loss = value if self.steps == 0 else self.first_loss
        self.last_loss = value
        self.steps += 1
        self.tokens += tokens
        self.seconds += secs
        if self.log:
            print(f"step {step + 1} {task}: loss {value:.4f}, {tokens} tokens, {secs:.3f} s",
                  file=sys.stderr)

    def line(self) -> str:
        """The one line on stdout that `cargo bench --bench train` reads."""
        rate = self.tokens / max(self.seconds, 1e-9)
        return (f"pytorch: {self.steps} steps, {self.tokens} tokens in {self.seconds:.1f} s of "
                f"training: {rate:.0f} tokens/s; first loss {self.first_loss:.4f}, last loss "
                f"{self.last_loss:.4f}")


class Mixture:
    """mixture.rs: the task of each step, drawn by weight among the tasks with batches."""

    def __init__(self, weights, seed):
        self.tasks, acc = [], 0.0
        for i, w in enumerate(weights):
            if w is not None and w > 0.0:
                acc += w
                self.tasks.append((i, acc))
        if not self.tasks:
            fail("no task has batches and a positive weight")
        self.seed = seed

    def pick(self, step):
        if len(self.tasks) == 1:
            return self.tasks[0][0]
        u = random.Random(f"mixture:{self.seed}:{step}").random() * self.tasks[-1][1]
        return next((i for i, c in self.tasks if u < c), self.tasks[-1][0])


class TaskData:
    """data.rs `TaskData`: length-bucketed batches (`cost(example)`: its longest side + 1,
    data.rs `Examples::cost`) and a per-epoch random order."""

    def __init__(self, examples, batch_tokens, batch_size, seed, cost):
        self.examples = examples
        self.seed = seed
        rng = random.Random(f"ties:{seed}")
        tie = [rng.random() for _ in examples]
        costs = [cost(e) for e in examples]
        order = sorted(range(len(examples)), key=lambda i: (costs[i], tie[i]))
        self.batches, current, widest = [], [], 0
        for i in order:
            c = costs[i]
            if batch_size is not None:
                full = len(current) >= batch_size
            elif batch_tokens is not None:
                full = (len(current) + 1) * max(widest, c) > batch_tokens
            else:
                full = len(current) >= 32
            if full and current:
                self.batches.append(current)
                current, widest = [], 0
            widest = max(widest, c)
            current.append(i)
        if current:
            self.batches.append(current)
        self._orders = {}

    def batch_at(self, pos):
        n = max(1, len(self.batches))
        epoch, cursor = pos[0] + pos[1] // n, pos[1] % n
        if epoch not in self._orders:
            order = list(range(len(self.batches)))
            random.Random(f"epoch:{self.seed}:{epoch}").shuffle(order)
            self._orders = {epoch: order}
        batch = self.batches[self._orders[epoch][cursor]]
        return batch, ((epoch + 1, 0) if cursor + 1 == n else (epoch, cursor + 1))


def start(doc: str):
    """The trainers' command line (`--run`, `--steps`, `--threads`, `--seed`, `--log`,
    `--setup-only`, `--device`) and torch with `--threads` threads, its default device
    `--device`: `(args, torch)`."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="a harness run directory (after `harness train`)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, help="default: the recipe's seed")
    ap.add_argument("--log", action="store_true", help="print every step on stderr")
    ap.add_argument("--setup-only", action="store_true", help="create the venv and exit")
    ap.add_argument("--device", default="cpu",
                    help="cpu, or cuda[:N]: the model, the batches and every step on that GPU "
                         "(the interpreter's own CUDA torch, scripts/pyenv.py)")
    args = ap.parse_args()
    if args.run is None:
        ap.error("--run RUN_DIR is required")
    # Thread counts must be fixed before torch starts its pools.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    # Every tensor the trainers make (weights, padded batches, masks) is made on the device;
    # each step ends in `loss.item()`, which waits for the GPU, so the seconds are the GPU's.
    torch.set_default_device(args.device)
    return args, torch


def run_recipe(args, tokenizer: bool = True):
    """The run directory of `args.run` and its resolved recipe, with `--seed` applied, and
    (when `tokenizer`) the path of its `tokenizer.json`, checked: `(run, recipe, path)`."""
    run = args.run
    recipe = load_recipe(run)
    if args.seed is not None:
        recipe["seed"] = args.seed
    tok_path = run / "tokenizer.json"
    if tokenizer and not tok_path.is_file():
        fail(f"{tok_path}: missing; pass a run directory of `harness train`")
    return run, recipe, tok_path


def open_run(args):
    """[`run_recipe`] with the run's `words` tokenizer (checked against words.rs's own cases):
    `(run, recipe, tokenizer, setup start time)`."""
    import time

    check_tokenizer()
    run, recipe, tok_path = run_recipe(args)
    setup = time.perf_counter()
    return run, recipe, WordsTokenizer(tok_path), setup


# ---------------------------------------------------------------- the words tokenizer
# crates/data/src/words.rs and tokenize.rs.

# Rust's `char::is_whitespace` (Unicode White_Space) and `char::is_control` (category Cc).
SEPARATORS = [(0x00, 0x20), (0x7F, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
              (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]
# words.rs `is_punct`: ASCII punctuation, then the listed Unicode punctuation.
PUNCT = [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E),
         (0xA1, 0xA1), (0xA7, 0xA7), (0xAB, 0xAB), (0xB6, 0xB6), (0xB7, 0xB7), (0xBB, 0xBB),
         (0xBF, 0xBF), (0x037E, 0x037E), (0x0387, 0x0387), (0x055A, 0x055F), (0x0589, 0x0589),
         (0x05BE, 0x05BE), (0x05C0, 0x05C0), (0x05C3, 0x05C3), (0x05F3, 0x05F4),
         (0x060C, 0x060C), (0x061B, 0x061B), (0x061F, 0x061F), (0x066A, 0x066D),
         (0x06D4, 0x06D4), (0x0964, 0x0965), (0x0970, 0x0970), (0x0E4F, 0x0E4F),
         (0x0E5A, 0x0E5B), (0x1361, 0x1368), (0x2010, 0x2027), (0x2030, 0x205E),
         (0x3001, 0x3003), (0x3008, 0x3011), (0x3014, 0x301F), (0x30FB, 0x30FB),
         (0xFF01, 0xFF0F), (0xFF1A, 0xFF20), (0xFF3B, 0xFF40), (0xFF5B, 0xFF65)]


def _char_class(ranges) -> str:
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


# words.rs `is_cjk_ideograph` (BERT's `_is_chinese_char` ranges), `is_thai`, `is_thai_mark`.
CJK = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
THAI = [(0x0E01, 0x0E5B)]
THAI_MARKS = [(0x0E31, 0x0E31), (0x0E34, 0x0E3A), (0x0E47, 0x0E4E)]


def word_re(cjk: bool, thai: bool):
    """`words::tokens_split(text, cjk, thai)`: a punctuation character alone; with `cjk` a CJK
    ideograph alone; with `thai` a Thai character and the combining marks after it; else a
    run of characters that are none of these nor separators."""
    alternatives = [f"[{_char_class(PUNCT)}]"]
    excluded = _char_class(SEPARATORS) + _char_class(PUNCT)
    if cjk:
        alternatives.append(f"[{_char_class(CJK)}]")
        excluded += _char_class(CJK)
    if thai:
        alternatives.append(f"[{_char_class(THAI)}][{_char_class(THAI_MARKS)}]*")
        excluded += _char_class(THAI)
    alternatives.append(f"[^{excluded}]+")
    return re.compile("|".join(alternatives))

MASK64 = (1 << 64) - 1


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a (words.rs `fnv1a64`)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & MASK64
    return h


def char_ngrams(word: str, sizes) -> list:
    """The UTF-8 bytes of every character n-gram of `<word>` (words.rs `char_ngrams`)."""
    padded = f"<{word}>"
    return [padded[s:s + n].encode("utf-8") for n in sizes for s in range(len(padded) - n + 1)]


class WordsTokenizer:
    """tokenize.rs `TextTokenizer::tokens` for a `words` tokenizer: per sentence the word ids
    and each word's n-gram ids (flat, with per-word counts), as numpy arrays."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self.inner = Tokenizer.from_file(str(path))
        self.vocab = self.inner.get_vocab(with_added_tokens=True)
        self.base_vocab = len(self.vocab)
        spec = [t for t in self.vocab if t.startswith(WORDS_PREFIX)]
        if not spec:
            fail(f"{path}: not a `words` tokenizer (no `{WORDS_PREFIX}…>` token); "
                 "this trainer reads recipes whose `data.tokenizer` is of kind `words`")
        self.oov, self.sizes, self.buckets = 0, [], 0
        cjk = thai = False
        for part in spec[0][len(WORDS_PREFIX):-1].split(";"):
            key, _, value = part.partition("=")
            if key == "cjk":
                cjk = value == "chars"
            elif key == "thai":
                thai = value == "clusters"
            elif key == "oov":
                self.oov = int(value)
            elif key == "buckets":
                self.buckets = int(value)
            elif key == "ngrams" and value:
                self.sizes = [int(v) for v in value.split(",")]
        self.word_re = word_re(cjk, thai)
        self.normalizer = self.inner.normalizer
        self._words = {}
        self._sentences = {}

    def vocab_size(self) -> int:
        return self.base_vocab + self.oov

    def ngram_buckets(self):
        return self.buckets if self.sizes else None

    def word(self, w: str):
        hit = self._words.get(w)
        if hit is None:
            i = self.vocab.get(w)
            if i is None:
                i = self.base_vocab + fnv1a64(w.encode("utf-8")) % self.oov if self.oov else UNK
            grams = [fnv1a64(g) % self.buckets for g in char_ngrams(w, self.sizes)] if self.sizes else []
            hit = self._words[w] = (i, grams)
        return hit

    def sentence(self, text: str, max_len: int):
        """A `Sentence` (memoized: conversation turns and running text repeat sentences)."""
        hit = self._sentences.get(text)
        if hit is None:
            norm = self.normalizer.normalize_str(text) if self.normalizer is not None else text
            ids, counts, grams = [], [], []
            for w in self.word_re.findall(norm)[:max_len]:
                i, g = self.word(w)
                ids.append(i)
                counts.append(len(g))
                grams.extend(g)
            hit = self._sentences[text] = Sentence(ids, counts, grams)
        return hit


class Sentence:
    """A tokenized sentence: word ids, the n-gram count of each word, the flat n-gram ids."""

    __slots__ = ("ids", "counts", "grams", "ends", "key")

    def __init__(self, ids, counts, grams):
        import numpy as np

        self.ids = np.asarray(ids, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.grams = np.asarray(grams, dtype=np.int64)
        self.ends = np.cumsum(self.counts)
        self.key = self.ids.tobytes()  # equal ids: the same sentence (RankingMasks::from_ids)

    def __len__(self):
        return len(self.ids)


def check_tokenizer() -> None:
    """words.rs's hand-computed cases (FNV-1a reference vectors, n-grams, tokens)."""
    assert fnv1a64(b"") == 0xCBF29CE484222325 and fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8
    assert [fnv1a64(g) % 1000 for g in char_ngrams("the", [3])] == [975, 924, 576]
    assert [g.decode() for g in char_ngrams("ab", [4, 3])] == ["<ab>", "<ab", "ab>"]
    plain = word_re(False, False)
    assert plain.findall("hello, world!  it's") == ["hello", ",", "world", "!", "it", "'", "s"]
    assert plain.findall("我爱北京。ภาษาไทย") == ["我爱北京", "。", "ภาษาไทย"]
    assert plain.findall("नमस्ते दुनिया।") == ["नमस्ते", "दुनिया", "।"]
    # `tokens_cjk_split_ideographs_only` and `thai_splits_into_clusters_with_their_marks`.
    assert word_re(True, False).findall("我爱北京。ok abc汉字 ひらがな한국어") == [
        "我", "爱", "北", "京", "。", "ok", "abc", "汉", "字", "ひらがな한국어"]
    assert word_re(True, True).findall("เป็น ภาษาไทย, ok!") == [
        "เ", "ป็", "น", "ภ", "า", "ษ", "า", "ไ", "ท", "ย", ",", "ok", "!"]
    assert word_re(False, True).findall("นี้๏汉字") == ["นี้", "๏", "汉字"]


# ---------------------------------------------------------------- the model (crates/model/src/)


def lstm_layers(enc: dict) -> list:
    """`(hidden, bidirectional)` of each layer of a `bilstm` or `lstm` encoder block
    (crates/model/src/encoder/bilstm.rs `from_bilstm`, `from_lstm`); `[]` for `cbow`."""
    if enc["kind"] == "bilstm":
        return [(int(enc["hidden"]), True)] * int(enc["layers"])
    if enc["kind"] == "lstm":
        n = max(1, int(enc["layers"]))
        top = int(enc.get("top_hidden") or enc["hidden"])
        return [(top if i + 1 == n else int(enc["hidden"]), i == 0 and bool(enc.get("bidirectional_first")))
                for i in range(n)]
    if enc["kind"] == "cbow":
        return []
    fail(f"encoder kind `{enc['kind']}` is not part of this trainer")


def sentence_encoder(enc: dict, n_vocab: int, global_dropout: float):
    """The `nn.Module` of a `bilstm`, `lstm` or `cbow` encoder block `enc`
    (crates/model/src/encoder/{bilstm.rs,cbow.rs}): `forward(ids, lengths)` of right-padded
    `ids: [batch, time]` gives the sentence vectors `[batch, d_sentence]`. Token embeddings ->
    the (Bi)LSTM layers over the real tokens (packed sequences; harness masks the state), with
    dropout (the encoder's own, else `global_dropout`) on the embeddings and between layers
    -> max/mean/last/cls pooling over the real positions. A `cbow` block has no layers and no
    dropout: its word embeddings, pooled."""
    import torch
    from torch import nn
    from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

    layers = lstm_layers(enc)
    enc_dropout = 0.0 if enc["kind"] == "cbow" else (num(enc.get("dropout"), 0.0) or global_dropout)
    default_pool = "mean" if enc["kind"] == "cbow" else "max"

    def drop_packed(p, prob, training):
        return PackedSequence(nn.functional.dropout(p.data, prob, training), p.batch_sizes,
                              p.sorted_indices, p.unsorted_indices)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(n_vocab, int(enc["embed"]))
            self.lstms = nn.ModuleList()
            d_in = int(enc["embed"])
            for h, bi in layers:
                self.lstms.append(nn.LSTM(d_in, h, batch_first=True, bidirectional=bi))
                d_in = h * (2 if bi else 1)
            self.d_sentence = d_in
            self.pool = enc.get("pool", default_pool)

        def forward(self, ids, lengths):
            x = nn.functional.dropout(self.embedding(ids), enc_dropout, self.training)
            if not self.lstms:
                real = (torch.arange(ids.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(2)
                if self.pool == "max":
                    return x.masked_fill(~real, float("-inf")).max(dim=1).values
                return (x * real).sum(dim=1) / lengths.unsqueeze(1).to(x.dtype)
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            h_n = None
            for i, lstm in enumerate(self.lstms):
                packed, (h_n, _) = lstm(packed)
                if i + 1 < len(self.lstms):
                    packed = drop_packed(packed, enc_dropout, self.training)
            if self.pool == "last":
                return torch.cat(list(h_n), dim=1)
            fill = float("-inf") if self.pool == "max" else 0.0
            states, _ = pad_packed_sequence(packed, batch_first=True, padding_value=fill)
            if self.pool == "max":
                return states.max(dim=1).values
            if self.pool == "mean":
                return states.sum(dim=1) / lengths.unsqueeze(1).to(states.dtype)
            return states[:, 0]

    return Encoder()


def init_uniform(system) -> None:
    """crates/model/src/system.rs `System::init`: every parameter U(−INIT_SCALE, INIT_SCALE);
    harness's LSTMs have one bias per gate set (lstm.rs `MaskedLstm.input`), so nn.LSTM's
    second (`bias_hh`) is held at 0 and out of training."""
    import torch
    from torch import nn

    with torch.no_grad():
        for p in system.parameters():
            nn.init.uniform_(p, -INIT_SCALE, INIT_SCALE)
        for m in system.modules():
            if isinstance(m, nn.LSTM):
                for name, p in m.named_parameters():
                    if name.startswith("bias_hh"):
                        p.zero_()
                        p.requires_grad_(False)


def mlp_heads(model: dict, d_sentence: int):
    """`model.heads` (all `mlp`) over sentence vectors of `d_sentence`, as an `nn.ModuleDict`
    in name order (system.rs builds them in the recipe's map order, which is sorted)."""
    import torch
    from torch import nn

    class Head(nn.Module):
        """heads.rs `Mlp`: with `classes` the hidden layers with the activation (tanh, or
        relu), then the output layer; without, a projection through the hidden sizes with the
        activation after every layer; `features: pair` reads (u, v, |u − v|, u ∗ v); the head's
        dropout before every layer."""

        def __init__(self, h, d_sentence):
            super().__init__()
            hidden = [int(x) for x in h.get("hidden") or []]
            classes = h.get("classes")
            self.projection = classes is None
            self.pair = h.get("features", "single") == "pair"
            self.relu = h.get("activation", "tanh") == "relu"
            self.dropout = num(h.get("dropout"), 0.0)
            sizes = hidden + ([] if classes is None else [int(classes)])
            if not sizes:
                fail("an mlp head needs `hidden` sizes or `classes`")
            d_in = (4 if self.pair else 1) * d_sentence
            self.layers = nn.ModuleList()
            for size in sizes:
                self.layers.append(nn.Linear(d_in, size))
                d_in = size
            self.d_output = d_in

        def forward(self, u, v=None):
            x = torch.cat([u, v, (u - v).abs(), u * v], dim=1) if self.pair and v is not None else u
            for i, layer in enumerate(self.layers):
                x = layer(nn.functional.dropout(x, self.dropout, self.training))
                if i + 1 < len(self.layers) or self.projection:
                    x = torch.relu(x) if self.relu else torch.tanh(x)
            return x

    heads = {}
    for name, h in sorted((model.get("heads") or {}).items()):
        if h.get("kind", "mlp") != "mlp":
            fail(f"head `{name}`: kind `{h.get('kind')}` is not part of this trainer")
        heads[name] = Head(h, d_sentence)
    return nn.ModuleDict(heads)


def pad(rows):
    """Right-padded `ids: [batch, time]` (PAD) and the lengths of `rows` (lists of ids)."""
    import torch

    # Built on the host, then moved in one copy (one per row would each wait on a GPU).
    width = max(1, max(len(r) for r in rows))
    ids = torch.full((len(rows), width), PAD, dtype=torch.long, device="cpu")
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.as_tensor(r, dtype=torch.long, device="cpu")
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long, device="cpu")
    device = torch.get_default_device()
    return ids.to(device), lengths.to(device)
