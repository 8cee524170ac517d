#!/usr/bin/env python3
"""A hand-written PyTorch trainer of harness's LASER model, fed by a harness run directory,
for comparing training throughput with `harness train` / `cargo bench --bench train`.

    target/release/harness train recipes/laser.yaml --set train.steps=1 --out /tmp/laser-run
    python3 scripts/bench_torch_laser.py --run /tmp/laser-run [--steps 30] [--threads 2]
    python3 scripts/bench_torch_laser.py --setup-only

It reads RUN_DIR/recipe.resolved.yaml (model sizes, tasks, optimizer, `train:` block),
RUN_DIR/tokenizer.json and the corpora harness trained on (RUN_DIR/corpora/<corpus>.jsonl,
after the contamination filter and the cap), trains `--steps` steps on the CPU with
`--threads` threads and prints exactly one line on stdout:

    pytorch: STEPS steps, TOKENS tokens in SECONDS s of training: RATE tokens/s; first loss L0, last loss L1

TOKENS counts what harness's trainer counts (crates/train/src/trainer.rs `task_loss`): the
real (unpadded) tokens of the encoder inputs and of the decoder inputs of each decoded
direction (a joint L2 loss's extra target encoding is not counted, as in harness); SECONDS
is the sum of the steps' wall times (batch tensors, forward, backward, clipping, update;
setup excluded), as harness's `session_seconds`. Progress goes to stderr (`--log` prints
every step).

The same as harness (file references are to this repository):
- model (crates/model/src/{encoder/bilstm.rs,decoder.rs,system.rs}): token embeddings ->
  stacked (Bi)LSTM over the real tokens (packed sequences; harness masks the state) ->
  max/mean/last/cls pooling over real positions; an LSTM decoder whose initial (h, c) of
  every layer are linear maps of the sentence vector and whose first layer sees, at every
  step, [sentence ; language-ID embedding] beside the previous token's embedding (harness
  projects that constant part once per sentence and adds it to the gates, `context`; here it
  is concatenated to each step's input, the same function with the same weights: LASER's own
  formulation); output Linear to the vocabulary. One bias per LSTM gate set, as harness
  (nn.LSTM's bias_hh is held at 0). Every parameter U(-0.1, 0.1) (system.rs INIT_SCALE).
- dropout (`optimizer.dropout`, or the encoder's own): on the encoder's embeddings and
  between its layers (not after the top one), on the decoder's input embeddings and after
  every decoder layer (also before the output projection); none on the sentence vector.
- inputs (crates/train/src/batch.rs): encoder rows = ids + `</s>`; decoder input = `<s>` (or
  the target's `<lang:xxx>` token when `lang_embed` is 0) + target ids; decoder output =
  target ids + `</s>`; ids clipped to `train.max_len` before `</s>` is added.
- data (crates/train/src/data.rs, plan.rs): pairs with an empty side dropped; each pair goes
  into a language of `decoder.targets` (drawn per pair when both are), then a fraction
  `autoencode` becomes target -> target; batches: examples sorted by the longer side (+1)
  with random tie-breaks, cut greedily so that examples x longest <= `train.batch_tokens`
  (or `batch_size` examples); each epoch visits the batches in a random order.
- objectives (crates/train/src/objectives/): token-mean cross-entropy with label smoothing
  (seq2seq_ce, both directions when asked); `l2_similarity` = alpha x mean over the batch of
  the squared L2 distance; a `joint_with` task adds weight x alpha x that on its partner's
  batch, between the source and target encodings. `ranking_softmax` = the in-batch
  translation-ranking loss (scaled cosines, softmax, copies of a positive masked, both
  directions averaged), standalone on its own batches (a dual encoder: no decoder needed) or
  joint with a translation task like the L2 term.
- mixture (crates/train/src/mixture.rs): one task per step, drawn by weight among the tasks
  with batches.
- optimizer (crates/train/src/optim.rs): Adam/AdamW/SGD with the recipe's lr, betas, eps,
  weight decay and schedule; global-norm clipping at `grad_clip` (clip_grad_norm_).

Not the same: random draws (initial values, direction/autoencode choices, tie-breaks, epoch
orders, task picks, dropout masks) come from Python/PyTorch generators seeded with the
recipe's seed, not harness's ChaCha streams, so the batches and token counts are the same
kind but not identical; the logits are computed for real tokens only (harness also computes
them at padded positions and masks them out of the loss).
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
import random  # noqa: E402
from bench_torch_common import (  # noqa: E402
    BOS, EOS, Meter, Mixture, TaskData, fail, init_uniform, learning_rate, make_optimizer, num,
    pad, run_recipe, sentence_encoder, start, update)


# ---------------------------------------------------------------- the run directory


def languages_of(tokenizer) -> list:
    """The training languages, sorted: index i is language ID i (tokenize.rs)."""
    langs = [t[len("<lang:"):-1] for t in tokenizer.get_vocab(with_added_tokens=True)
             if t.startswith("<lang:") and t.endswith(">")]
    return sorted(langs)


def read_parallel(path: Path) -> list:
    """`[(src_lang, tgt_lang, [(source, target), ...]), ...]` in the file's order (one part
    per run of lines with the same language pair, as harness writes them)."""
    parts = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            o = json.loads(line)
            if "source" not in o:
                fail(f"{path}: not a parallel corpus (NLI tasks are not part of this trainer)")
            key = (o["src_lang"], o["tgt_lang"])
            if not parts or parts[-1][:2] != key:
                parts.append((key[0], key[1], []))
            parts[-1][2].append((o["source"], o["target"]))
    return parts


# ---------------------------------------------------------------- data (crates/train/src/data.rs)


def encode_all(tokenizer, texts, max_len) -> list:
    return [e.ids[:max_len] for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]


def pair_examples(tokenizer, langs, parts, targets, both, autoencode, max_len, seed) -> list:
    """Examples `(src ids, tgt ids, src lang index, tgt lang index)`."""
    out = []
    for ci, (sl, tl, pairs) in enumerate(parts):
        if sl not in langs or tl not in langs:
            fail(f"the tokenizer has no language token for `{sl}` or `{tl}`")
        si, ti = langs.index(sl), langs.index(tl)
        into_tgt, into_src = tl in targets, sl in targets
        src = encode_all(tokenizer, (p[0] for p in pairs), max_len)
        tgt = encode_all(tokenizer, (p[1] for p in pairs), max_len)
        rng = random.Random(f"pairs:{seed}:{ci}")
        for s, t in zip(src, tgt):
            if not s or not t:
                continue
            if both:
                forward = True
            elif into_tgt and into_src:
                forward = rng.random() < 0.5
            elif into_tgt or into_src:
                forward = into_tgt
            else:
                continue
            ex = [s, t, si, ti] if forward else [t, s, ti, si]
            if autoencode > 0.0 and rng.random() < autoencode:
                ex[0], ex[2] = ex[1], ex[3]
            out.append(tuple(ex))
    return out


# ---------------------------------------------------------------- the plan (crates/train/src/plan.rs)


def compile_plan(run, recipe, tokenizer, langs):
    model = recipe.get("model") or {}
    dec = model.get("decoder")
    if dec is not None and dec.get("kind") != "lstm":
        fail(f"decoder kind `{dec.get('kind')}` is not part of this trainer")
    translates = any(t["objective"] == "seq2seq_ce" for t in recipe.get("tasks") or [])
    if translates and dec is None:
        fail("a seq2seq_ce task needs `model.decoder`")
    dec = dec or {}
    targets = list(dec.get("targets") or [])
    if dec and int(dec.get("lang_embed", 32)) == 0:
        ids = [tokenizer.token_to_id(f"<lang:{l}>") for l in langs]
        first = [BOS if i is None else i for i in ids]
    else:
        first = None  # <s>
    train = recipe.get("train") or {}
    max_len = int(train.get("max_len", 250))
    seed = int(recipe.get("seed", 1))
    tasks = []
    for ti, task in enumerate(recipe.get("tasks") or []):
        objective, params = task["objective"], task.get("params") or {}
        plan = {"name": task["name"], "objective": objective, "params": params,
                "weight": num(task.get("weight"), 1.0), "data": None, "joint_l2": [], "joint_rank": []}
        if objective in ("l2_similarity", "ranking_softmax") and params.get("joint_with"):
            tasks.append(plan)
            continue
        if objective not in ("seq2seq_ce", "l2_similarity", "ranking_softmax"):
            fail(f"task `{task['name']}`: objective `{objective}` is not part of this trainer")
        path = run / "corpora" / f"{task['corpus']}.jsonl"
        if not path.is_file():
            fail(f"{path}: missing; train the run with a harness that writes RUN_DIR/corpora/ "
                 "(`harness train RECIPE --out RUN_DIR` writes it before training)")
        if objective == "seq2seq_ce" and not params.get("both_directions", False):
            both, autoencode = False, num(params.get("autoencode"), 0.0)
        else:
            both, autoencode = True, 0.0
        examples = pair_examples(tokenizer, langs, read_parallel(path), targets, both, autoencode,
                                 max_len, seed + ti)
        if not examples:
            fail(f"task `{task['name']}`: no example to train on")
        batch_size = task.get("batch_size") or train.get("batch_size")
        batch_tokens = train.get("batch_tokens")
        plan["data"] = TaskData(examples, None if batch_tokens is None else int(batch_tokens),
                                None if batch_size is None else int(batch_size), seed * 31 + ti,
                                lambda e: max(len(e[0]), len(e[1])) + 1)
        tasks.append(plan)
    for task in tasks:
        partner = task["params"].get("joint_with")
        if task["objective"] not in ("l2_similarity", "ranking_softmax") or not partner:
            continue
        match = [t for t in tasks if t["name"] == partner]
        if not match:
            fail(f"task `{task['name']}`: no task named `{partner}`")
        if task["objective"] == "l2_similarity":
            match[0]["joint_l2"].append(task["weight"] * num(task["params"].get("alpha"), 1.0))
        else:
            match[0]["joint_rank"].append((task["weight"], ranking_params(task["params"])))
    mixture = Mixture([t["weight"] if t["data"] else None for t in tasks], seed)
    return tasks, mixture, first, seed


# ---------------------------------------------------------------- the model


def ranking_params(params):
    """(scale, margin, bidirectional) of a ranking_softmax task (schema defaults 20, 0, true)."""
    return (num(params.get("scale"), 20.0), num(params.get("margin"), 0.0),
            bool(params.get("bidirectional", True)))


def build_model(recipe, n_vocab, n_langs):
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence

    model_spec = recipe["model"]
    enc, dec = model_spec["encoder"], model_spec.get("decoder")
    global_dropout = num((recipe.get("optimizer") or {}).get("dropout"), 0.0)
    if enc["kind"] not in ("bilstm", "lstm"):
        fail(f"encoder kind `{enc['kind']}` is not part of this trainer")

    d_lang = int((dec or {}).get("lang_embed", 32))
    n_dec = max(1, int((dec or {}).get("layers", 1)))
    d_hid = int((dec or {}).get("hidden", 0))

    class Decoder(nn.Module):
        def __init__(self, d_sentence):
            super().__init__()
            self.embedding = nn.Embedding(n_vocab, int(dec["embed"]))
            self.lang_embedding = nn.Embedding(max(1, n_langs), d_lang) if d_lang > 0 else None
            self.init_hidden = nn.Linear(d_sentence, n_dec * d_hid)
            self.init_cell = nn.Linear(d_sentence, n_dec * d_hid)
            self.lstm = nn.LSTM(int(dec["embed"]) + d_sentence + d_lang, d_hid, num_layers=n_dec,
                                batch_first=True, dropout=global_dropout if n_dec > 1 else 0.0)
            self.output = nn.Linear(d_hid, n_vocab)

        def forward(self, sentence, langs, inputs, lengths):
            """Logits `[real tokens, vocab]` in the packed order of `order` (decreasing length)."""
            batch, time_ = inputs.shape
            lengths, order = torch.sort(lengths, descending=True)
            sentence, inputs = sentence[order], inputs[order]
            ctx = sentence
            if self.lang_embedding is not None:
                ctx = torch.cat([sentence, self.lang_embedding(langs[order])], dim=1)
            emb = nn.functional.dropout(self.embedding(inputs), global_dropout, self.training)
            x = torch.cat([emb, ctx.unsqueeze(1).expand(batch, time_, ctx.shape[1])], dim=2)
            h0 = self.init_hidden(sentence).view(batch, n_dec, d_hid).transpose(0, 1).contiguous()
            c0 = self.init_cell(sentence).view(batch, n_dec, d_hid).transpose(0, 1).contiguous()
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=True)
            out, _ = self.lstm(packed, (h0, c0))
            y = nn.functional.dropout(out.data, global_dropout, self.training)
            return self.output(y), lengths, order

    class System(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = sentence_encoder(enc, n_vocab, global_dropout)
            # A dual encoder (ranking only) has no decoder.
            self.decoder = Decoder(self.encoder.d_sentence) if dec else None

    system = System()
    init_uniform(system)
    return system


# ---------------------------------------------------------------- training


def decoder_side(targets, langs, first):
    """(inputs, outputs, lengths, languages) of teacher forcing (crates/train/src/batch.rs)."""
    import torch

    inputs = [[BOS if first is None else first[l]] + t for t, l in zip(targets, langs)]
    outputs = [t + [EOS] for t in targets]
    ids, lengths = pad(inputs)
    out_ids, _ = pad(outputs)
    return ids, out_ids, lengths, torch.tensor(langs, dtype=torch.long)


def translation_loss(system, sentence, side, smoothing):
    import torch
    from torch.nn.utils.rnn import pack_padded_sequence

    ids, out_ids, lengths, langs = side
    logits, sorted_lengths, order = system.decoder(sentence, langs, ids, lengths)
    gold = pack_padded_sequence(out_ids[order], sorted_lengths.cpu(), batch_first=True, enforce_sorted=True).data
    return torch.nn.functional.cross_entropy(logits, gold, label_smoothing=smoothing)


def l2(a, b, scale):
    return ((a - b) ** 2).sum() * (scale / max(1, a.shape[0]))


def ranking(u, v, src_rows, tgt_rows, params):
    """ranking_softmax (crates/train/src/objectives/ranking_softmax.rs): softmax over the
    scaled cosines of each source against the batch's targets (and back when bidirectional),
    copies of a row's positive masked, rows whose two sides are equal left out."""
    import torch

    scale, margin, bidirectional = params
    n = u.shape[0]
    un = u / u.norm(dim=1, keepdim=True).clamp_min(1e-8)
    vn = v / v.norm(dim=1, keepdim=True).clamp_min(1e-8)
    eye = torch.eye(n, dtype=torch.bool)
    scores = (un @ vn.T - margin * eye.float()) * scale
    valid = torch.tensor([s != t for s, t in zip(src_rows, tgt_rows)], dtype=torch.float32)
    count = max(1.0, float(valid.sum()))

    def same(rows):
        return torch.tensor([[j != i and rows[j] == rows[i] for j in range(n)] for i in range(n)],
                            dtype=torch.bool)

    def diagonal_ce(s, masked):
        logp = torch.log_softmax(s.masked_fill(masked, -1.0e4), dim=1)
        return -(logp.diagonal() * valid).sum() / count

    loss = diagonal_ce(scores, same(tgt_rows))
    if bidirectional:
        loss = (loss + diagonal_ce(scores.T, same(src_rows))) / 2.0
    return loss


def task_loss(system, task, index, first):
    """The loss of one batch of `task` and the real tokens it read (trainer.rs `task_loss`)."""
    ex = [task["data"].examples[i] for i in index]
    src_ids, src_len = pad([e[0] + [EOS] for e in ex])
    tgt_ids, tgt_len = pad([e[1] + [EOS] for e in ex])
    p = task["params"]
    if task["objective"] == "l2_similarity":
        a = system.encoder(src_ids, src_len)
        c = system.encoder(tgt_ids, tgt_len)
        return l2(a, c, num(p.get("alpha"), 1.0)), int(src_len.sum() + tgt_len.sum())
    if task["objective"] == "ranking_softmax":
        a = system.encoder(src_ids, src_len)
        c = system.encoder(tgt_ids, tgt_len)
        loss = ranking(a, c, [e[0] for e in ex], [e[1] for e in ex], ranking_params(p))
        return loss, int(src_len.sum() + tgt_len.sum())
    smoothing = num(p.get("label_smoothing"), 0.0)
    both = bool(p.get("both_directions", False))
    to_tgt = decoder_side([e[1] for e in ex], [e[3] for e in ex], first)
    enc = system.encoder(src_ids, src_len)
    loss = translation_loss(system, enc, to_tgt, smoothing)
    tokens = int(src_len.sum() + to_tgt[2].sum())
    if both or task["joint_l2"] or task["joint_rank"]:
        enc_t = system.encoder(tgt_ids, tgt_len)
        if both:
            to_src = decoder_side([e[0] for e in ex], [e[2] for e in ex], first)
            loss = loss + translation_loss(system, enc_t, to_src, smoothing)
            tokens += int(tgt_len.sum() + to_src[2].sum())
        for scale in task["joint_l2"]:
            loss = loss + l2(enc, enc_t, scale)
        for weight, params in task["joint_rank"]:
            loss = loss + weight * ranking(enc, enc_t, [e[0] for e in ex], [e[1] for e in ex], params)
    return loss, tokens


def main() -> int:
    args, torch = start(__doc__)
    from tokenizers import Tokenizer

    run, recipe, tok_path = run_recipe(args)
    tokenizer = Tokenizer.from_file(str(tok_path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    langs = languages_of(tokenizer)
    setup = time.perf_counter()
    tasks, mixture, first, seed = compile_plan(run, recipe, tokenizer, langs)
    torch.manual_seed(seed)
    system = build_model(recipe, tokenizer.get_vocab_size(with_added_tokens=True), len(langs))
    system.train()
    params = [p for p in system.parameters() if p.requires_grad]
    spec = recipe["optimizer"]
    optimizer = make_optimizer(spec, params)
    clip = spec.get("grad_clip")
    steps_per_epoch = sum(len(t["data"].batches) for t in tasks if t["data"])
    n_params = sum(p.numel() for p in params)
    summary = ", ".join(f"{t['name']}: {len(t['data'].examples)} examples in {len(t['data'].batches)} batches"
                        for t in tasks if t["data"])
    print(f"setup {time.perf_counter() - setup:.1f} s; {summary}; {n_params} trainable parameters; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)

    positions = {t["name"]: (0, 0) for t in tasks if t["data"]}
    meter = Meter(args.log)
    for step in range(args.steps):
        started = time.perf_counter()
        task = tasks[mixture.pick(step)]
        index, positions[task["name"]] = task["data"].batch_at(positions[task["name"]])
        loss, tokens = task_loss(system, task, index, first)
        lr = learning_rate(spec, step, args.steps, steps_per_epoch)
        value = update(torch, optimizer, params, loss, clip, lr)
        meter.add(step, task["name"], value, tokens, time.perf_counter() - started)
    print(meter.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
