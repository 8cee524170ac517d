#!/usr/bin/env python3
"""A hand-written PyTorch trainer of harness's multilingual-USE model (recipes/muse-xling.yaml),
fed by a harness run directory, for comparing training throughput with `harness train` /
`cargo bench --bench train` (the transformer's fair peer: PyTorch's own CPU
`nn.TransformerEncoderLayer`).

    target/release/harness train recipes/muse-xling.yaml --set train.steps=1 --out /tmp/muse-run
    python3 scripts/bench_torch_muse.py --run /tmp/muse-run [--steps 60] [--threads 2] [--log]
    python3 scripts/bench_torch_muse.py --setup-only

It reads RUN_DIR/recipe.resolved.yaml (model sizes, heads, tasks, optimizer, `train:` block),
RUN_DIR/tokenizer.json, the corpora harness trained on (RUN_DIR/corpora/<corpus>.jsonl, after
the contamination filter and the cap) and the mined hard negatives
(RUN_DIR/hard-negatives/<task>.json), trains `--steps` steps on the CPU with `--threads`
threads and prints exactly one line on stdout:

    pytorch: STEPS steps, TOKENS tokens in SECONDS s of training: RATE tokens/s; first loss L0, last loss L1

TOKENS counts what harness's trainer counts (crates/train/src/step.rs `Step::encode` and
`Step::hard_negatives`, summed by crates/train/src/trainer.rs): the real tokens, `</s>`
included, of every encoder input of the step, once each: source and target plus the k hard
negatives of each example (translation ranking), message and response (response ranking),
sentence, previous and next (quick-thought), premise and hypothesis (NLI). SECONDS is the
sum of the steps' wall times (batch tensors, forward, backward, clipping, update; setup and
tokenization excluded), as harness's `session_seconds`. Progress goes to stderr (`--log`
prints every step).

The same as harness (file references are to this repository):
- tokenizer (crates/data/src/tokenize.rs `TextTokenizer::tokens`/`words`,
  crates/data/src/words.rs), in Python: tokenizer.json's own normalizer (NFKC, lowercasing
  when the recipe asks; run by the `tokenizers` library as harness does); words split at
  whitespace and control characters, each punctuation character of `is_punct` a word of its
  own; the first `train.max_len` words kept; a word in the vocabulary gets its id, another
  `base_vocab + fnv1a64(word) % oov_buckets` (or `<unk>` without buckets); each word's
  character n-grams of `<word>` (sizes in order, then by start) `fnv1a64 % hash_buckets`. The
  settings come from the `<words:oov=…;ngrams=…;buckets=…>` token of tokenizer.json
  (`WordsSpec::parse`).
- encoder (crates/model/src/encoder/transformer.rs, char_ngrams.rs `embed_tokens`): each
  token is ½(E_w[word] + tanh(W·Σ E_c[n-gram] + b)) (a token without n-grams, `</s>`, gets
  tanh(b)); a Linear embed → d_model when `embed` differs from `d_model`; ×√d_model; plus
  sinusoidal positions (sin at even, cos at odd dimensions); dropout; `layers` ×
  `nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout, relu, batch_first,
  norm_first)` with the key padding mask; the final LayerNorm (ε 1e-5), states zeroed at
  padding; mean pooling over real tokens (max/cls/last too). Inputs are the words + `</s>`
  (crates/train/src/batch.rs `encoder_input`), clipped to the encoder's `max_len` after the
  input layer. Dropout is the encoder's `dropout` (the optimizer's when 0).
- heads (crates/model/src/heads.rs): `mlp` heads; without `classes` a projection through
  the hidden sizes with the activation after every layer (tanh by default); with `classes`
  hidden layers with the activation, then the output layer; `features: pair` reads
  (u, v, |u − v|, u ∗ v); dropout (the head's) before every layer.
- initialisation (crates/model/src/system.rs `System::init`): every parameter U(−0.1, 0.1),
  then the transformer's LayerNorms at gain 1, bias 0 (`reset_norms`).
- objectives (crates/train/src/objectives/): `translation_ranking` = dot-product in-batch
  softmax of each source against the batch's targets and its k hard negatives
  (ranking_softmax.rs `ranking_softmax`, scale 1, `margin` off the positive, `bidirectional`
  adds the reverse ranking without the negatives); a target equal to the row's own (by token
  ids) is masked, a row whose two sides are equal adds no term; the negatives are the
  targets of the examples listed in hard-negatives/<task>.json for each example, k the fewest
  any example of the batch has (step.rs `Step::hard_negatives`), encoded in a separate pass
  with dropout. `response_ranking`: message vectors against response vectors through the
  `head`, one direction. `quick_thought` (context 1): the sentence through `input_head`
  ranked against the next sentences through `next_head`, plus against the previous ones
  through `previous_head`. `nli_classification`: the pair head's logits, mean cross-entropy.
  Encoder passes in harness's order, one per side.
- data (crates/train/src/data.rs, plan.rs): translation pairs in the file's order, every
  pair source → target (`Directions::Both`), pairs with an empty side dropped (the hard
  negatives index these examples); conversation turns (message, response) with an empty
  side dropped; running text as (previous, sentence, next) windows inside each document, all
  three non-empty (`context_examples`); NLI (premise, hypothesis, label). Batches: examples
  sorted by their longest side + 1 with random tie-breaks, cut every `batch_size` examples
  (the task's, else `train.batch_size`; else by `train.batch_tokens`); each epoch visits a
  task's batches in a random order; each task keeps its own position.
- mixture (crates/train/src/mixture.rs): one task per step, drawn by weight.
- optimizer (crates/train/src/optim.rs): Adam/AdamW/SGD with the recipe's lr, betas, eps,
  weight decay and schedule; global-norm clipping at `grad_clip` (clip_grad_norm_) when the
  recipe sets it; `embedding_grad_scale` multiplies the word and n-gram tables' gradients.

Not the same: random draws (initial values, tie-breaks, epoch orders, task picks, dropout
masks) come from Python/PyTorch generators seeded with the recipe's seed, not harness's
ChaCha streams, so the batches, the task sequence and the token counts are the same kind
(the same examples and batches per task, the same mean tokens per batch) but not identical;
harness computes the global gradient norm every step (for its metrics) even without
`grad_clip`, this trainer only when it clips; the n-gram sums use
`nn.EmbeddingBag(mode="sum")` where harness scatter-adds into the token grid; padded keys
get −∞ in PyTorch's attention and −10⁴ in harness's (the same softmax: every row has a real
token). The tokenizer is a Python transcription: the separator and punctuation classes are
Rust's `char::is_whitespace`/`is_control` and words.rs's `is_punct` written out as ranges,
the normalizer runs in the Python `tokenizers` (0.23) where harness links the Rust crate
(0.22); words.rs's hand-computed cases are checked at start, but the ids have not been
compared one by one with harness's. Only what recipes/muse-xling.yaml trains is supported
(one stage, the four objectives above, `mlp` heads, no further named encoders).
"""

import sys
import time
from pathlib import Path

PACKAGES = ["torch", "tokenizers", "numpy", "pyyaml"]

if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in scripts/
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyenv

    pyenv.activate(PACKAGES, setup_only="--setup-only" in sys.argv[1:])

import json  # noqa: E402
import math  # noqa: E402
from bench_torch_common import (  # noqa: E402
    Mixture, TaskData, fail, learning_rate, load_recipe, make_optimizer, num, start)
import re  # noqa: E402

# harness's fixed ids (crates/data/src/tokenize.rs).
PAD, UNK, BOS, EOS = 0, 1, 2, 3
INIT_SCALE = 0.1
WORDS_PREFIX = "<words:"
OBJECTIVES = ("translation_ranking", "response_ranking", "quick_thought", "nli_classification")






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
                 "this trainer is for recipes/muse-xling.yaml")
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


# ---------------------------------------------------------------- the run directory




def read_jsonl(path: Path) -> list:
    if not path.is_file():
        fail(f"{path}: missing; train the run with a harness that writes RUN_DIR/corpora/ "
             "(`harness train RECIPE --out RUN_DIR` writes it before training)")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def need(rows, keys, path):
    if rows and not all(k in rows[0] for k in keys):
        fail(f"{path}: expected lines with {', '.join(keys)}")


# ---------------------------------------------------------------- data (crates/train/src/data.rs)


def task_examples(objective, rows, path, tok, max_len):
    """The task's examples (tuples of `Sentence`s, NLI with its label), as data.rs makes them."""
    if objective == "translation_ranking":
        need(rows, ("source", "target"), path)
        pairs = ((tok.sentence(r["source"], max_len), tok.sentence(r["target"], max_len)) for r in rows)
        return [p for p in pairs if len(p[0]) and len(p[1])]
    if objective == "response_ranking":
        need(rows, ("message", "response"), path)
        pairs = ((tok.sentence(r["message"], max_len), tok.sentence(r["response"], max_len)) for r in rows)
        return [p for p in pairs if len(p[0]) and len(p[1])]
    if objective == "quick_thought":
        need(rows, ("document", "sentence"), path)
        docs = []
        for r in rows:
            if not docs or docs[-1][0] != r["document"]:
                docs.append((r["document"], []))
            docs[-1][1].append(tok.sentence(r["sentence"], max_len))
        out = []
        for _, doc in docs:
            for prev, sent, nxt in zip(doc, doc[1:], doc[2:]):
                if len(prev) and len(sent) and len(nxt):
                    out.append((sent, prev, nxt))  # sides First, Second, Third (step.rs)
        return out
    need(rows, ("premise", "hypothesis", "label"), path)
    triples = ((tok.sentence(r["premise"], max_len), tok.sentence(r["hypothesis"], max_len), int(r["label"]))
               for r in rows)
    return [t for t in triples if len(t[0]) and len(t[1])]


def cost(example) -> int:
    """data.rs `Examples::cost`: the longest side + 1 (`</s>`)."""
    return max(len(s) for s in example if isinstance(s, Sentence)) + 1








# ---------------------------------------------------------------- the plan (crates/train/src/plan.rs)


def read_negatives(run: Path, task: dict, n_examples: int, k: int):
    """hard_negatives.rs: `negatives[i]` = the examples whose targets are example i's hard
    negatives, as harness mined them into RUN_DIR/hard-negatives/<task>.json."""
    path = run / "hard-negatives" / f"{task['name']}.json"
    if not path.is_file():
        fail(f"{path}: missing; run `harness train` on the run directory first (it mines the "
             "hard negatives before training)")
    cached = json.loads(path.read_text())
    negatives = cached.get("negatives") or []
    if len(negatives) != n_examples:
        fail(f"{path}: {len(negatives)} rows for {n_examples} examples of task `{task['name']}`")
    if int(cached.get("k", k)) != k:
        fail(f"{path}: mined with k = {cached.get('k')}, the recipe asks for {k}")
    return negatives


def compile_plan(run, recipe, tok):
    train = recipe.get("train") or {}
    max_len = int(train.get("max_len", 250))
    seed = int(recipe.get("seed", 1))
    stages = {int(t.get("stage", 1)) for t in recipe.get("tasks") or []}
    if len(stages) > 1:
        fail(f"stages {sorted(stages)}: several stages are not part of this trainer")
    tasks = []
    for ti, task in enumerate(recipe.get("tasks") or []):
        objective, params = task["objective"], task.get("params") or {}
        if objective not in OBJECTIVES:
            fail(f"task `{task['name']}`: objective `{objective}` is not part of this trainer")
        if objective == "quick_thought" and int(params.get("context", 1)) != 1:
            fail(f"task `{task['name']}`: quick-thought context must be 1")
        path = run / "corpora" / f"{task['corpus']}.jsonl"
        examples = task_examples(objective, read_jsonl(path), path, tok, max_len)
        if not examples:
            fail(f"task `{task['name']}`: no example to train on")
        negatives = None
        k = int(params.get("hard_negatives") or 0)
        if objective == "translation_ranking" and k > 0:
            negatives = read_negatives(run, task, len(examples), k)
        batch_size = task.get("batch_size") or train.get("batch_size")
        batch_tokens = train.get("batch_tokens")
        data = TaskData(examples, None if batch_tokens is None else int(batch_tokens),
                        None if batch_size is None else int(batch_size), seed * 31 + ti, cost)
        tasks.append({"name": task["name"], "objective": objective, "params": params,
                      "weight": num(task.get("weight"), 1.0), "data": data, "negatives": negatives})
    if not tasks:
        fail("the recipe has no task")
    mixture = Mixture([t["weight"] for t in tasks], seed)
    return tasks, mixture, seed


# ---------------------------------------------------------------- the model


def positions(time_, d):
    """transformer.rs `positions`: sin at even dimensions, cos at odd ones, in f64."""
    import torch

    pos = torch.arange(time_, dtype=torch.float64).unsqueeze(1)
    i = torch.div(torch.arange(d), 2, rounding_mode="floor").to(torch.float64)
    angle = pos / torch.pow(10000.0, 2.0 * i / d)
    table = torch.where(torch.arange(d) % 2 == 0, torch.sin(angle), torch.cos(angle))
    return table.to(torch.float32)


def build_model(recipe, n_vocab, ngram_buckets):
    import torch
    from torch import nn

    spec = recipe["model"]
    enc = spec["encoder"]
    if enc.get("kind") != "transformer":
        fail(f"encoder kind `{enc.get('kind')}` is not part of this trainer (scripts/bench_torch_laser.py "
             "trains the LSTM encoders)")
    if spec.get("encoders"):
        fail("further named encoders (`model.encoders`) are not part of this trainer")
    d_model, d_ff, heads = int(enc["d_model"]), int(enc["d_ff"]), int(enc["heads"])
    n_layers, enc_max = int(enc["layers"]), int(enc.get("max_len", 64))
    d_embed = int(enc.get("embed") or d_model)
    dropout = num(enc.get("dropout"), 0.0)
    if dropout <= 0.0:
        dropout = num((recipe.get("optimizer") or {}).get("dropout"), 0.0)
    pool = enc.get("pool", "mean")

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(n_vocab, d_embed)
            # The n-gram sums of every token (char_ngrams.rs `CharNgrams`): empty bags are 0.
            self.ngram_table = nn.EmbeddingBag(ngram_buckets, d_embed, mode="sum") if ngram_buckets else None
            self.ngram_layer = nn.Linear(d_embed, d_embed) if ngram_buckets else None
            self.projection = nn.Linear(d_embed, d_model) if d_embed != d_model else None
            layer = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout, activation="relu",
                                               batch_first=True, norm_first=True)
            self.transformer = nn.TransformerEncoder(layer, n_layers, norm=nn.LayerNorm(d_model),
                                                     enable_nested_tensor=False)
            self.register_buffer("table", positions(enc_max, d_model), persistent=False)

        def forward(self, ids, mask, grams, offsets):
            """`ids, mask: [batch, time]` (time ≤ max_len), `grams, offsets`: the n-gram bags
            of the row-major token grid. Sentence vectors `[batch, d_model]`."""
            batch, time_ = ids.shape
            x = self.embedding(ids)
            if self.ngram_table is not None:
                c = torch.tanh(self.ngram_layer(self.ngram_table(grams, offsets)))
                x = (x + c.view(batch, time_, d_embed)) * 0.5
            if self.projection is not None:
                x = self.projection(x)
            x = x * math.sqrt(d_model) + self.table[:time_]
            x = nn.functional.dropout(x, dropout, self.training)
            maskf = mask.to(x.dtype).unsqueeze(2)
            states = self.transformer(x, src_key_padding_mask=~mask) * maskf
            if pool == "mean":
                return states.sum(dim=1) / maskf.sum(dim=1)
            if pool == "max":
                return states.masked_fill(maskf == 0, float("-inf")).max(dim=1).values
            if pool == "cls":
                return states[:, 0]
            return states.sum(dim=1)  # `last` without recurrent final states (pool.rs)

    class Head(nn.Module):
        """heads.rs `Mlp`."""

        def __init__(self, h):
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
            d_in = (4 if self.pair else 1) * d_model
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

    class System(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = Encoder()
            heads = {}
            for name, h in sorted((spec.get("heads") or {}).items()):
                if h.get("kind", "mlp") != "mlp":
                    fail(f"head `{name}`: kind `{h.get('kind')}` is not part of this trainer")
                heads[name] = Head(h)
            self.heads = nn.ModuleDict(heads)

    system = System()
    with torch.no_grad():
        for p in system.parameters():
            nn.init.uniform_(p, -INIT_SCALE, INIT_SCALE)
        for m in system.encoder.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.fill_(1.0)
                m.bias.fill_(0.0)
    system.enc_max = enc_max
    return system


# ---------------------------------------------------------------- training


class EncoderInput:
    """batch.rs `encoder_input`: rows + `</s>`, right-padded, clipped to the encoder's max_len
    (transformer.rs), with the n-gram bags of the grid; `tokens` counts before clipping
    (input.rs `Padded::tokens`)."""

    def __init__(self, rows, enc_max, with_grams):
        import numpy as np
        import torch

        lengths = [len(r) + 1 for r in rows]
        self.tokens = sum(lengths)
        width = min(max(lengths), enc_max)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        counts = np.zeros((len(rows), width), dtype=np.int64)
        grams = []
        for i, r in enumerate(rows):
            n = min(len(r), width)
            ids[i, :n] = r.ids[:n]
            if len(r) < width:
                ids[i, len(r)] = EOS
            if with_grams and n:
                counts[i, :n] = r.counts[:n]
                grams.append(r.grams[: r.ends[n - 1]])
        self.ids = torch.from_numpy(ids)
        self.mask = torch.arange(width).unsqueeze(0) < torch.tensor(lengths).clamp(max=width).unsqueeze(1)
        if with_grams:
            flat = counts.reshape(-1)
            offsets = np.zeros_like(flat)
            np.cumsum(flat[:-1], out=offsets[1:])
            self.grams = torch.from_numpy(np.concatenate(grams) if grams else np.zeros(0, dtype=np.int64))
            self.offsets = torch.from_numpy(offsets)
        else:
            self.grams = self.offsets = None

    def args(self):
        return self.ids, self.mask, self.grams, self.offsets


class Masks:
    """ranking_softmax.rs `RankingMasks::from_ids`."""

    def __init__(self, sources, targets):
        import torch

        n = len(sources)
        s = [x.key for x in sources]
        t = [x.key for x in targets]
        self.valid = torch.tensor([s[i] != t[i] for i in range(n)], dtype=torch.float32)
        self.same_target = torch.tensor([[j != i and t[j] == t[i] for j in range(n)] for i in range(n)])
        self.same_source = torch.tensor([[j != i and s[j] == s[i] for j in range(n)] for i in range(n)])


def diagonal_ce(scores, masked, valid):
    import torch

    logp = torch.log_softmax(scores.masked_fill(masked, -1.0e4), dim=1)
    count = max(1.0, float(valid.sum()))
    return -(logp.diagonal() * valid).sum() / count


def ranking(u, v, extra, masks, margin=0.0, bidirectional=False):
    """ranking_softmax.rs `ranking_softmax` with dot-product scores (scale 1)."""
    import torch

    n = u.shape[0]
    scores = u @ v.T
    if margin:
        scores = scores - margin * torch.eye(n)
    if extra is None:
        forward = diagonal_ce(scores, masks.same_target, masks.valid)
    else:
        extra_scores = torch.bmm(u.unsqueeze(1), extra.transpose(1, 2)).squeeze(1)  # [n, k]
        masked = torch.cat([masks.same_target, torch.zeros(n, extra.shape[1], dtype=torch.bool)], dim=1)
        forward = diagonal_ce(torch.cat([scores, extra_scores], dim=1), masked, masks.valid)
    if not bidirectional:
        return forward
    return (forward + diagonal_ce(scores.T, masks.same_source, masks.valid)) / 2.0


def task_loss(system, task, index, with_grams):
    """The loss of one batch of `task` and the real tokens it read (step.rs, trainer.rs)."""
    import torch

    enc_max = system.enc_max
    ex = [task["data"].examples[i] for i in index]
    p, objective = task["params"], task["objective"]

    def encode(rows):
        x = EncoderInput(rows, enc_max, with_grams)
        return system.encoder(*x.args()), x.tokens

    def head(name, x):
        return system.heads[name](x) if name else x

    if objective == "translation_ranking":
        masks = Masks([e[0] for e in ex], [e[1] for e in ex])
        u, a = encode([e[0] for e in ex])
        v, b = encode([e[1] for e in ex])
        tokens, extra = a + b, None
        negatives = task["negatives"]
        if negatives is not None:
            k = min(len(negatives[i]) for i in index)
            if k > 0:
                examples = task["data"].examples
                h, c = encode([examples[j][1] for i in index for j in negatives[i][:k]])
                tokens += c
                extra = h.view(len(index), k, h.shape[1])
        loss = ranking(u, v, extra, masks, num(p.get("margin"), 0.0), bool(p.get("bidirectional", False)))
        return loss, tokens
    if objective == "response_ranking":
        masks = Masks([e[0] for e in ex], [e[1] for e in ex])
        u, a = encode([e[0] for e in ex])
        v, b = encode([e[1] for e in ex])
        return ranking(u, head(p.get("head"), v), None, masks), a + b
    if objective == "quick_thought":
        to_previous = Masks([e[0] for e in ex], [e[1] for e in ex])
        to_next = Masks([e[0] for e in ex], [e[2] for e in ex])
        i, a = encode([e[0] for e in ex])
        prev, b = encode([e[1] for e in ex])
        nxt, c = encode([e[2] for e in ex])
        i = head(p.get("input_head"), i)
        prev = head(p.get("previous_head"), prev)
        nxt = head(p.get("next_head"), nxt)
        return ranking(i, nxt, None, to_next) + ranking(i, prev, None, to_previous), a + b + c
    # nli_classification
    u, a = encode([e[0] for e in ex])
    v, b = encode([e[1] for e in ex])
    labels = torch.tensor([e[2] for e in ex], dtype=torch.long)
    logits = system.heads[p["head"]](u, v)
    return torch.nn.functional.cross_entropy(logits, labels), a + b




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


def main() -> int:
    args, torch = start(__doc__)

    check_tokenizer()
    run = args.run
    recipe = load_recipe(run)
    if args.seed is not None:
        recipe["seed"] = args.seed
    tok_path = run / "tokenizer.json"
    if not tok_path.is_file():
        fail(f"{tok_path}: missing; pass a run directory of `harness train`")
    setup = time.perf_counter()
    tok = WordsTokenizer(tok_path)
    tasks, mixture, seed = compile_plan(run, recipe, tok)
    torch.manual_seed(seed)
    buckets = tok.ngram_buckets()
    system = build_model(recipe, tok.vocab_size(), buckets)
    system.train()
    params = [p for p in system.parameters() if p.requires_grad]
    spec = recipe["optimizer"]
    optimizer = make_optimizer(spec, params)
    clip = spec.get("grad_clip")
    grad_scale = num(spec.get("embedding_grad_scale"), 1.0)
    tables = [system.encoder.embedding.weight]
    if system.encoder.ngram_table is not None:
        tables.append(system.encoder.ngram_table.weight)
    steps_per_epoch = sum(len(t["data"].batches) for t in tasks)
    n_params = sum(p.numel() for p in params)
    summary = ", ".join(f"{t['name']}: {len(t['data'].examples)} examples in {len(t['data'].batches)} batches"
                        for t in tasks)
    print(f"setup {time.perf_counter() - setup:.1f} s; {summary}; {n_params} trainable parameters; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)

    positions_ = {t["name"]: (0, 0) for t in tasks}
    tokens_total, seconds, first_loss, last_loss = 0, 0.0, None, None
    for step in range(args.steps):
        started = time.perf_counter()
        task = tasks[mixture.pick(step)]
        index, positions_[task["name"]] = task["data"].batch_at(positions_[task["name"]])
        loss, tokens = task_loss(system, task, index, buckets is not None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if grad_scale != 1.0:
            for t in tables:
                if t.grad is not None:
                    t.grad.mul_(grad_scale)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, num(clip))
        lr = learning_rate(spec, step, args.steps, steps_per_epoch)
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.step()
        value = loss.item()
        secs = time.perf_counter() - started
        if not math.isfinite(value):
            fail(f"step {step}: task {task['name']} diverged (loss {value})")
        seconds += secs
        tokens_total += tokens
        first_loss = value if first_loss is None else first_loss
        last_loss = value
        if args.log:
            print(f"step {step + 1} {task['name']}: loss {value:.4f}, {tokens} tokens, {secs:.3f} s",
                  file=sys.stderr)
    rate = tokens_total / max(seconds, 1e-9)
    print(f"pytorch: {args.steps} steps, {tokens_total} tokens in {seconds:.1f} s of training: "
          f"{rate:.0f} tokens/s; first loss {first_loss if first_loss is not None else float('nan'):.4f}, "
          f"last loss {last_loss if last_loss is not None else float('nan'):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
