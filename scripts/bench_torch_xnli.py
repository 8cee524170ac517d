#!/usr/bin/env python3
"""A hand-written PyTorch trainer of harness's XNLI alignment model (recipes/xnli-align.yaml:
X-BiLSTM, and X-CBOW with `--profile x-cbow`), fed by a harness run directory, for comparing
training throughput with `harness train` / `cargo bench --bench train`.

    target/release/harness train recipes/xnli-align.yaml --set train.steps=1 \\
        --set stages.2.steps=1 --out /tmp/xnli-run
    python3 scripts/bench_torch_xnli.py --run /tmp/xnli-run [--steps 60] [--threads 2] [--log]
    python3 scripts/bench_torch_xnli.py --setup-only

It reads RUN_DIR/recipe.resolved.yaml (model, heads, tasks, stages, optimizer, `train:`
block), RUN_DIR/tokenizer.json and the corpora harness trained on
(RUN_DIR/corpora/<corpus>.jsonl, after the contamination filter and the cap), trains the
first `--steps` steps of the recipe's stage schedule (fewer when the schedule is shorter) on
the CPU with `--threads` threads and prints exactly one line on stdout:

    pytorch: STEPS steps, TOKENS tokens in SECONDS s of training: RATE tokens/s; first loss L0, last loss L1

TOKENS counts what harness's trainer counts (crates/train/src/step.rs `Step::encode`, summed
by crates/train/src/trainer.rs): the real tokens, `</s>` included, of every encoder input of
the step, once each: premise and hypothesis (NLI), the target-language sentence and its
English translation (alignment; the frozen English side counts too). SECONDS is the sum of
the steps' wall times (stage start, batch tensors, forward, backward, clipping, update;
setup and tokenization excluded), as harness's `session_seconds`. Progress goes to stderr
(`--log` prints every step).

The same as harness (file references are to this repository):
- tokenizer: the `words` tokenizer in Python (bench_torch_common.py `WordsTokenizer`, see
  scripts/bench_torch_muse.py for what it transcribes); ids clipped to `train.max_len`,
  `</s>` appended (crates/train/src/batch.rs `encoder_input`).
- encoders (crates/model/src/encoder/{bilstm.rs,cbow.rs}, system.rs): `encoder` and every
  `model.encoders` entry, each token embeddings -> (Bi)LSTM over the real tokens (packed
  sequences; harness masks the state) -> max/mean/last pooling over real positions, or for
  `cbow` the pooled embeddings; one bias per LSTM gate set (nn.LSTM's bias_hh held at 0);
  every parameter U(-0.1, 0.1) (system.rs INIT_SCALE); dropout: the encoder's own, else the
  optimizer's.
- head (crates/model/src/heads.rs): `mlp` with `features: pair`, (u, v, |u - v|, u * v) ->
  hidden layers with tanh (or relu) -> classes, the head's dropout before every layer.
- objectives (crates/train/src/objectives/): `nli_classification` = mean cross-entropy of
  the head's logits on (premise, hypothesis), both through the task's encoder (`reads` for
  the hypothesis when given). `alignment_l2` = mean_i ||x_i - y_i|| - lambda * mean over
  `negatives` cyclic shifts s in [1, batch) of (mean_i ||x_{i+s} - y_i|| + mean_i
  ||x_i - y_{i+s}||), each distance sqrt(sum of squares + 1e-12), x the source side through
  the task's `encoder`, y the target side through the one it `reads`; no shift when lambda
  is 0 or the batch has one pair.
- data (crates/train/src/data.rs, plan.rs): NLI (premise, hypothesis, label) and pairs
  (source, target: every pair one example, `Directions::Both`), an example with an empty
  side dropped; batches: examples sorted by their longest side + 1 with random tie-breaks,
  cut every `batch_size` examples (the task's, else `train.batch_size`; else by
  `train.batch_tokens`); each epoch visits a task's batches in a random order; each task
  keeps its own position across stages.
- stages (plan.rs `compile_stages`, trainer.rs `Loop::step`): the distinct `stage:` numbers
  of the tasks in order; a stage's length is `stages.N.steps` (or `epochs` x its batches),
  else `train.steps` (or `train.epochs`); each stage draws its tasks by weight (mixture.rs)
  from the recipe's seed + its index, counting its own steps; at a stage's first step the
  listed encoders become copies of theirs (`stages.N.init`), its `frozen` groups
  (`encoder`, a `model.encoders` name, `NAME.embeddings`, `heads.NAME`) leave training, a
  wholly frozen encoder encodes without dropout, and a later stage starts a fresh
  optimizer; the learning rate is the stage's `lr` or the optimizer's, its schedule over the
  stage's own steps.
- optimizer (crates/train/src/optim.rs): Adam/AdamW/SGD with the recipe's lr, betas, eps,
  weight decay and schedule; global-norm clipping at `grad_clip` (clip_grad_norm_) when the
  recipe sets it.

Not the same: random draws (initial values, tie-breaks, epoch orders, task picks, dropout
masks, the alignment's shifts) come from Python/PyTorch generators seeded with the recipe's
seed, not harness's ChaCha streams, so the batches, the task sequence and the token counts
are the same kind (the same examples and batches per task) but not identical; harness
computes the global gradient norm every step (for its metrics) even without `grad_clip`,
this trainer only when it clips; harness re-applies the frozen groups at every step of a
stage that has them (`System::with_frozen`), this trainer once at the stage's start. Only
what the XNLI recipes train is supported: the two objectives above, `words` tokenizers
without character n-grams, `bilstm`/`lstm`/`cbow` encoders, `mlp` heads.
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

import random  # noqa: E402
from bench_torch_common import (  # noqa: E402
    EOS, Meter, Mixture, TaskData, fail, init_uniform, learning_rate, make_optimizer, mlp_heads,
    need, num, open_run, pad, read_jsonl, sentence_encoder, start, update)

OBJECTIVES = ("nli_classification", "alignment_l2")
# The encoder tasks read when they name none (crates/model/src/system.rs `MAIN_ENCODER`).
MAIN = "encoder"
# alignment_l2.rs `EPS`: under the square root of each distance.
EPS = 1e-12


# ---------------------------------------------------------------- data (crates/train/src/data.rs)


def task_examples(objective, rows, path, tok, max_len):
    """`(first ids, second ids[, label])` with `</s>` appended, an empty side dropped."""

    def ids(text):
        return tok.sentence(text, max_len).ids.tolist()

    if objective == "alignment_l2":
        need(rows, ("source", "target"), path)
        pairs = ((ids(r["source"]), ids(r["target"])) for r in rows)
        return [(s + [EOS], t + [EOS]) for s, t in pairs if s and t]
    need(rows, ("premise", "hypothesis", "label"), path)
    triples = ((ids(r["premise"]), ids(r["hypothesis"]), int(r["label"])) for r in rows)
    return [(p + [EOS], h + [EOS], label) for p, h, label in triples if p and h]


def cost(example) -> int:
    """data.rs `Examples::cost`: the longest side + 1 (the `</s>` is already in the rows)."""
    return max(len(example[0]), len(example[1]))


# ---------------------------------------------------------------- the plan (crates/train/src/plan.rs)


def compile_tasks(run, recipe, tok, encoders, heads):
    train = recipe.get("train") or {}
    max_len = int(train.get("max_len", 250))
    seed = int(recipe.get("seed", 1))
    tasks = []
    for ti, task in enumerate(recipe.get("tasks") or []):
        objective, params = task["objective"], task.get("params") or {}
        if objective not in OBJECTIVES:
            fail(f"task `{task['name']}`: objective `{objective}` is not part of this trainer")
        if params.get("joint_with"):
            fail(f"task `{task['name']}`: joint tasks are not part of this trainer")
        first = task.get("encoder") or MAIN
        second = task.get("reads") or first
        for name in (first, second):
            if name not in encoders:
                fail(f"task `{task['name']}`: no encoder named `{name}`")
        if objective == "nli_classification" and params.get("head") not in heads:
            fail(f"task `{task['name']}`: no head named `{params.get('head')}`")
        path = run / "corpora" / f"{task['corpus']}.jsonl"
        examples = task_examples(objective, read_jsonl(path), path, tok, max_len)
        if not examples:
            fail(f"task `{task['name']}`: no example to train on")
        batch_size = task.get("batch_size") or train.get("batch_size")
        batch_tokens = train.get("batch_tokens")
        data = TaskData(examples, None if batch_tokens is None else int(batch_tokens),
                        None if batch_size is None else int(batch_size), seed * 31 + ti, cost)
        tasks.append({"name": task["name"], "objective": objective, "params": params,
                      "weight": num(task.get("weight"), 1.0), "stage": int(task.get("stage", 1)),
                      "encoders": (first, second), "data": data})
    if not tasks:
        fail("the recipe has no task")
    return tasks


def compile_stages(recipe, tasks):
    """plan.rs `compile_stages`: `[{number, start, steps, steps_per_epoch, lr, frozen, init,
    mixture}]` in order."""
    train = recipe.get("train") or {}
    specs = {int(k): v or {} for k, v in (recipe.get("stages") or {}).items()}
    seed = int(recipe.get("seed", 1))
    stages, start_ = [], 0
    for k, n in enumerate(sorted({t["stage"] for t in tasks})):
        weights = [t["weight"] if t["stage"] == n else None for t in tasks]
        per_epoch = sum(len(t["data"].batches) for t in tasks if t["stage"] == n)
        own = specs.get(n, {})
        if own.get("steps") is not None:
            steps = int(own["steps"])
        elif own.get("epochs") is not None:
            steps = int(own["epochs"]) * per_epoch
        elif train.get("steps") is not None:
            steps = int(train["steps"])
        elif train.get("epochs") is not None:
            steps = int(train["epochs"]) * per_epoch
        else:
            steps = per_epoch
        stages.append({"number": n, "start": start_, "steps": steps, "steps_per_epoch": per_epoch,
                       "lr": own.get("lr"), "frozen": list(own.get("frozen") or []),
                       "init": dict(own.get("init") or {}), "mixture": Mixture(weights, seed + k)})
        start_ += steps
    return stages


# ---------------------------------------------------------------- the model


def build_model(recipe, n_vocab):
    from torch import nn

    model = recipe["model"]
    global_dropout = num((recipe.get("optimizer") or {}).get("dropout"), 0.0)
    blocks = {MAIN: model["encoder"], **dict(sorted((model.get("encoders") or {}).items()))}

    class System(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoders = nn.ModuleDict({name: sentence_encoder(e, n_vocab, global_dropout)
                                           for name, e in blocks.items()})
            self.heads = mlp_heads(model, self.encoders[MAIN].d_sentence)

    system = System()
    init_uniform(system)
    return system


def group(system, name):
    """The parameters of parameter group `name` (system.rs `SystemConfig::group`), and the
    encoder it freezes whole (`None` for a table or a head)."""
    if name.startswith("heads.") and name[len("heads."):] in system.heads:
        return list(system.heads[name[len("heads."):]].parameters()), None
    if name in system.encoders:
        return list(system.encoders[name].parameters()), name
    if name.endswith(".embeddings") and name[: -len(".embeddings")] in system.encoders:
        return list(system.encoders[name[: -len(".embeddings")]].embedding.parameters()), None
    fail(f"no parameter group `{name}`")


def start_stage(system, stage, trainable, spec):
    """trainer.rs `Loop::step` at a stage's first step: the copies, the frozen groups, a
    fresh optimizer over what trains. Returns the optimizer and its parameters."""
    import torch

    with torch.no_grad():
        for target, source in stage["init"].items():
            system.encoders[target].load_state_dict(system.encoders[source].state_dict())
    for p in trainable:
        p.requires_grad_(True)
    for e in system.encoders.values():
        e.train()
    for g in stage["frozen"]:
        params, encoder = group(system, g)
        for p in params:
            p.requires_grad_(False)
        if encoder is not None:
            system.encoders[encoder].eval()  # a frozen encoder is a fixed target: no dropout
    params = [p for p in trainable if p.requires_grad]
    return make_optimizer(spec, params), params


# ---------------------------------------------------------------- training


def distances(a, b):
    """`||a_i - b_i||` per row (alignment_l2.rs `distances`)."""
    return ((a - b) ** 2).sum(dim=1).add(EPS).sqrt()


def task_loss(system, task, index, draws):
    """The loss of one batch of `task` and the real tokens it read (step.rs, trainer.rs)."""
    import torch

    ex = [task["data"].examples[i] for i in index]
    first, second = (system.encoders[n] for n in task["encoders"])
    a_ids, a_len = pad([e[0] for e in ex])
    b_ids, b_len = pad([e[1] for e in ex])
    tokens = int(a_len.sum() + b_len.sum())
    u = first(a_ids, a_len)
    v = second(b_ids, b_len)
    p = task["params"]
    if task["objective"] == "nli_classification":
        labels = torch.tensor([e[2] for e in ex], dtype=torch.long)
        logits = system.heads[p["head"]](u, v)
        return torch.nn.functional.cross_entropy(logits, labels), tokens
    lam, n = num(p.get("lambda"), 0.25), len(ex)
    k = int(p.get("negatives", 1)) if lam > 0.0 and n > 1 else 0
    loss = distances(u, v).mean()
    if k:
        negative = 0.0
        for s in (1 + draws.randrange(n - 1) for _ in range(k)):
            # Rows (i + s) mod n: alignment_l2.rs `rolled`.
            negative = negative + distances(torch.roll(u, -s, 0), v).mean() \
                + distances(u, torch.roll(v, -s, 0)).mean()
        loss = loss - negative * (lam / k)
    return loss, tokens


def main() -> int:
    args, torch = start(__doc__)

    run, recipe, tok, setup = open_run(args)
    if tok.ngram_buckets() is not None:
        fail("character n-grams (`data.tokenizer.char_ngrams`) are not part of this trainer")
    seed = int(recipe.get("seed", 1))
    torch.manual_seed(seed)
    system = build_model(recipe, tok.vocab_size())
    system.train()
    tasks = compile_tasks(run, recipe, tok, system.encoders, system.heads)
    stages = compile_stages(recipe, tasks)
    total = stages[-1]["start"] + stages[-1]["steps"]
    steps = min(args.steps, total)
    trainable = [p for p in system.parameters() if p.requires_grad]
    spec = recipe["optimizer"]
    clip = spec.get("grad_clip")
    summary = ", ".join(f"{t['name']}: {len(t['data'].examples)} examples in {len(t['data'].batches)} batches"
                        for t in tasks)
    schedule = ", ".join(f"stage {s['number']}: steps {s['start'] + 1}-{s['start'] + s['steps']}" for s in stages)
    print(f"setup {time.perf_counter() - setup:.1f} s; {summary}; {schedule}; training steps 1-{steps}; "
          f"{sum(p.numel() for p in trainable)} parameters; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr)

    positions = {t["name"]: (0, 0) for t in tasks}
    meter = Meter(args.log)
    optimizer = params = None
    for step in range(steps):
        started = time.perf_counter()
        stage = next(s for s in stages if step < s["start"] + s["steps"])
        local = step - stage["start"]
        if local == 0:
            optimizer, params = start_stage(system, stage, trainable, spec)
        task = tasks[stage["mixture"].pick(local)]
        index, positions[task["name"]] = task["data"].batch_at(positions[task["name"]])
        draws = random.Random(f"noise:{seed}:{step}")
        loss, tokens = task_loss(system, task, index, draws)
        lr_spec = spec if stage["lr"] is None else {**spec, "lr": stage["lr"]}
        lr = learning_rate(lr_spec, local, stage["steps"], stage["steps_per_epoch"])
        value = update(torch, optimizer, params, loss, clip, lr)
        meter.add(step, task["name"], value, tokens, time.perf_counter() - started)
    print(meter.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
