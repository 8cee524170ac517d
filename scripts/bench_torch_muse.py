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
    EOS, Meter, Mixture, Sentence, TaskData, fail, init_uniform, learning_rate, make_optimizer,
    mlp_heads, need, num, open_run, read_jsonl, start, update)

OBJECTIVES = ("translation_ranking", "response_ranking", "quick_thought", "nli_classification")


# ---------------------------------------------------------------- the run directory


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

    class System(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = Encoder()
            self.heads = mlp_heads(spec, d_model)

    system = System()
    init_uniform(system)
    with torch.no_grad():
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


def main() -> int:
    args, torch = start(__doc__)

    run, recipe, tok, setup = open_run(args)
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
    meter = Meter(args.log)

    def scale_grads():
        for t in tables:
            if t.grad is not None:
                t.grad.mul_(grad_scale)

    for step in range(args.steps):
        started = time.perf_counter()
        task = tasks[mixture.pick(step)]
        index, positions_[task["name"]] = task["data"].batch_at(positions_[task["name"]])
        loss, tokens = task_loss(system, task, index, buckets is not None)
        lr = learning_rate(spec, step, args.steps, steps_per_epoch)
        value = update(torch, optimizer, params, loss, clip, lr, scale_grads if grad_scale != 1.0 else None)
        meter.add(step, task["name"], value, tokens, time.perf_counter() - started)
    print(meter.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
