#!/usr/bin/env python3
"""A hand-written PyTorch trainer of harness's Emu model (recipes/emu.yaml: a pretrained BERT,
multilingual-e5-small, fine-tuned with an L2-constrained softmax, a center loss and a WGAN
language critic), fed by a harness run directory, for comparing training throughput with
`harness train` / `cargo bench --bench train`.

    target/release/harness train recipes/emu.yaml --set train.steps=0 --out /tmp/emu-run
    target/release/harness export /tmp/emu-run --out /tmp/emu-run/peer-model
    python3 scripts/bench_torch_emu.py --run /tmp/emu-run [--steps 20] [--threads 2] [--log]
    python3 scripts/bench_torch_emu.py --setup-only

It reads RUN_DIR/recipe.resolved.yaml (heads, tasks, stages, optimizer, `train:` block), the
corpora harness trained on (RUN_DIR/corpora/<corpus>.jsonl, after the contamination filter
and the cap) and the encoder's starting weights as a sentence-transformers folder,
RUN_DIR/peer-model (`harness export` of a run of the same recipe: HF `BertModel` names, the
model's `tokenizer.json` and its prompt; `cargo bench --bench train` writes it), trains the
first `--steps` steps on the CPU with `--threads` threads and prints exactly one line on
stdout:

    pytorch: STEPS steps, TOKENS tokens in SECONDS s of training: RATE tokens/s; first loss L0, last loss L1

TOKENS counts what harness's trainer counts (crates/train/src/step.rs `Step::tokens`): the
real tokens, `<s>` and `</s>` included, of the encoder inputs of each main update, once
each: the labelled batch and the adversarial task's own batch (the critic's inner updates
encode batches too, uncounted, as in harness). SECONDS is the sum of the steps' wall times
(inner updates, batch tensors, forward, backward, update, the centres' update; setup and
tokenization excluded), as harness's `session_seconds`. Progress goes to stderr (`--log`
prints every step).

The same as harness (file references are to this repository):
- tokenizer: the model's own (`tokenizer.json` of the folder, HF `tokenizers`), the folder's
  prompt (e5's `query: `) prepended, at most `train.max_len` content tokens between `<s>` and
  `</s>` (crates/data/src/pretrained_tokenizer.rs `encode`).
- encoder (crates/model/src/encoder/bert_sentence.rs): HF `BertModel` (no pooler) from the
  folder, no dropout (harness fine-tunes without), mean pooling over the real tokens,
  specials included; its `embeddings` module (word, position and type tables and their
  LayerNorm) frozen when a stage lists `encoder.embeddings`.
- heads (crates/model/src/system.rs, heads.rs): `l2_softmax` and `centers` one linear layer
  over the sentence vector to the classes of the task's corpus (the centres are its weight's
  columns, starting at zero); `discriminator` an MLP with relu through `hidden`, one output,
  the head's dropout before every layer; heads U(-0.1, 0.1) (system.rs INIT_SCALE).
- objectives (crates/train/src/objectives/): `l2_softmax` = mean cross-entropy of
  (alpha * u / ||u||) W + b (`constrained: false`: u W + b); `center_loss` = lambda *
  sum_i ||u_i - c_{y_i}||^2 / (2m) against the centres as they are, then after the optimizer
  step c_j -= center_lr * sum_{i: y_i = j} (c_j - u_i) / (1 + n_j) (Wen et al.);
  `adversarial_language` = lambda * (mean D(u) - mean D(v)) with v the task's own batch of
  other-language sentences (its corpus, its own batch order), the critic frozen; before
  that, `critic_steps` critic updates (trainer.rs `Loop::inner_loop`), each on a random batch
  of the labelled task and one of the adversarial corpus, the encoder fixed (no gradient),
  loss -(mean D(u) - mean D(v)), the critic's own Adam at the task's `lr` (the recipe's betas
  and eps), every critic weight then clipped to the head's `clip`.
- data (crates/train/src/data.rs, plan.rs): labelled sentences (an empty one dropped), batches
  sorted by length with random tie-breaks, cut every `batch_size`; each epoch visits a task's
  batches in a random order; joint tasks (`joint_with`) add their loss to the drawn task's
  on the same encodings (weighted by their `weight`).
- optimizer (crates/train/src/optim.rs): Adam with the recipe's lr, betas, eps and schedule
  over what trains (the frozen groups and the critic out); global-norm clipping at
  `grad_clip` when the recipe sets it.

Not the same: random draws (heads' initial values, tie-breaks, epoch orders, the critic's
batches, dropout masks) come from Python/PyTorch generators seeded with the recipe's seed, not
harness's ChaCha streams, so the batches are the same kind but not identical; attention is
transformers' own (SDPA) where harness runs its fused CPU kernels. Only what recipes/emu.yaml
and its profiles train is supported: the three objectives above, one pretrained BERT encoder
with mean, cls or max pooling, one stage.
"""

import sys
import time
from pathlib import Path

PACKAGES = ["torch", "transformers", "tokenizers", "numpy", "pyyaml"]

if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in scripts/
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyenv

    pyenv.activate(PACKAGES, setup_only="--setup-only" in sys.argv[1:])

import json  # noqa: E402
import random  # noqa: E402
from bench_torch_common import (  # noqa: E402
    INIT_SCALE, Meter, Mixture, TaskData, fail, learning_rate, make_optimizer, need, num,
    read_jsonl, run_recipe, start, update)

OBJECTIVES = ("l2_softmax", "center_loss", "adversarial_language")
# l2_softmax.rs `MIN_NORM`.
MIN_NORM = 1e-12
# heads with which kind of objective.
HEAD_OF = {"l2_softmax": "l2_softmax", "center_loss": "centers", "adversarial_language": "discriminator"}


# ---------------------------------------------------------------- data


class Tokenizer:
    """pretrained_tokenizer.rs `encode` through the exported folder's `tokenizer.json`: the
    prompt, then `<s>`, at most `max_len` content tokens, `</s>`."""

    def __init__(self, folder: Path, max_len: int):
        from tokenizers import Tokenizer as HfTokenizer

        self.inner = HfTokenizer.from_file(str(folder / "tokenizer.json"))
        st = folder / "config_sentence_transformers.json"
        config = json.loads(st.read_text()) if st.is_file() else {}
        name = config.get("default_prompt_name")
        self.prefix = (config.get("prompts") or {}).get(name, "") if name else ""
        bert = json.loads((folder / "config.json").read_text())
        self.keep = max(1, min(max_len, int(bert.get("max_position_embeddings", 512)) - 2))

    def ids(self, text: str) -> list:
        ids = self.inner.encode(self.prefix + text).ids
        if len(ids) < 2:
            return []
        return ids[:1] + ids[1:-1][: self.keep] + ids[-1:]


def labelled(rows, path, tok):
    """`(ids, label)` of a labelled corpus (or, for Emu-Parallel, `(target ids, source ids)`
    of pairs: the English side first), an empty sentence dropped."""
    if rows and "label" in rows[0]:
        # session.rs `write_corpora`: the class names; their indices here are their sorted
        # order (harness's own order changes nothing a throughput comparison measures).
        need(rows, ("sentence", "label"), path)
        classes = {c: i for i, c in enumerate(sorted({str(r["label"]) for r in rows}))}
        out = ((tok.ids(r["sentence"]), classes[str(r["label"])]) for r in rows)
        return [(ids, label) for ids, label in out if len(ids) > 2]
    need(rows, ("source", "target"), path)
    out = ((tok.ids(r["target"]), tok.ids(r["source"])) for r in rows)
    return [(t, s) for t, s in out if len(t) > 2 and len(s) > 2]


def compile_tasks(run, recipe, tok):
    train = recipe.get("train") or {}
    seed = int(recipe.get("seed", 1))
    names = [t["name"] for t in recipe.get("tasks") or []]
    tasks = []
    for ti, task in enumerate(recipe.get("tasks") or []):
        objective, params = task["objective"], task.get("params") or {}
        if objective not in OBJECTIVES:
            fail(f"task `{task['name']}`: objective `{objective}` is not part of this trainer")
        if int(task.get("stage", 1)) != 1:
            fail(f"task `{task['name']}`: stages after the first are not part of this trainer")
        joint = params.get("joint_with")
        if joint is not None and joint not in names:
            fail(f"task `{task['name']}`: joint with an unknown task `{joint}`")
        path = run / "corpora" / f"{task['corpus']}.jsonl"
        # A joint task that does not draw its own batches reads its partner's.
        own = joint is None or objective == "adversarial_language"
        data = None
        if own:
            examples = labelled(read_jsonl(path), path, tok)
            if not examples:
                fail(f"task `{task['name']}`: no example to train on")
            batch_size = task.get("batch_size") or train.get("batch_size")
            batch_tokens = train.get("batch_tokens")
            data = TaskData(examples, None if batch_tokens is None else int(batch_tokens),
                            None if batch_size is None else int(batch_size), seed * 31 + ti,
                            lambda e: len(e[0]))
        tasks.append({"name": task["name"], "objective": objective, "params": params,
                      "weight": num(task.get("weight"), 1.0), "joint_with": joint, "data": data})
    for t in tasks:
        t["joint"] = [j for j, u in enumerate(tasks) if u["joint_with"] == t["name"]]
    if not any(t["joint_with"] is None for t in tasks):
        fail("the recipe has no task of its own (every task is joint)")
    return tasks


def classes_of(run, recipe, tasks):
    """The class count of each head read by a labelled task (`head-classes.json` when the run
    has it, else the labels of the task's corpus)."""
    saved = run / "head-classes.json"
    counts = json.loads(saved.read_text()) if saved.is_file() else {}
    by_name = {t["name"]: t for t in tasks}
    for t in tasks:
        head = t["params"].get("head")
        source = t if t["data"] is not None else by_name[t["joint_with"]]
        if t["objective"] != "adversarial_language":
            seen = 1 + max(label for _, label in source["data"].examples)
            counts[head] = max(int(counts.get(head, 0)), seen)
    return counts


# ---------------------------------------------------------------- the model


def build_model(recipe, folder, classes):
    import torch
    from torch import nn
    from transformers import BertModel

    model = recipe["model"]
    enc = model["encoder"]
    if enc.get("kind") != "pretrained":
        fail(f"encoder kind `{enc.get('kind')}` is not part of this trainer (a pretrained BERT)")
    pool = enc.get("pool", "mean")
    if pool not in ("mean", "cls", "max"):
        fail(f"pooling `{pool}` is not part of this trainer")

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            # No dropout: harness fine-tunes without (bert_sentence.rs).
            self.bert = BertModel.from_pretrained(
                str(folder), add_pooling_layer=False, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0)
            self.d_sentence = self.bert.config.hidden_size

        def forward(self, ids, mask):
            states = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            states = states * mask.unsqueeze(2).to(states.dtype)
            if pool == "cls":
                return states[:, 0]
            if pool == "max":
                return states.masked_fill(mask.unsqueeze(2) == 0, float("-inf")).max(dim=1).values
            return states.sum(dim=1) / mask.sum(dim=1, keepdim=True).to(states.dtype)

    class Critic(nn.Module):
        """heads.rs `Mlp` of a discriminator: relu between layers, dropout before each."""

        def __init__(self, h, d):
            super().__init__()
            sizes = [int(x) for x in h.get("hidden") or []] + [1]
            self.dropout = num(h.get("dropout"), 0.0)
            self.layers = nn.ModuleList()
            for size in sizes:
                self.layers.append(nn.Linear(d, size))
                d = size

        def forward(self, x):
            for i, layer in enumerate(self.layers):
                x = layer(nn.functional.dropout(x, self.dropout, self.training))
                if i + 1 < len(self.layers):
                    x = torch.relu(x)
            return x

    encoder = Encoder()
    d = encoder.d_sentence
    heads, centers, critics = nn.ModuleDict(), {}, nn.ModuleDict()
    for name, h in sorted((model.get("heads") or {}).items()):
        kind = h.get("kind")
        if kind == "l2_softmax":
            heads[name] = nn.Linear(d, int(h.get("classes") or classes.get(name, 1)))
        elif kind == "centers":
            centers[name] = torch.zeros(int(h.get("classes") or classes.get(name, 1)), d)
        elif kind == "discriminator":
            critics[name] = Critic(h, d)
        else:
            fail(f"head `{name}`: kind `{kind}` is not part of this trainer")
    with torch.no_grad():
        for p in list(heads.parameters()) + list(critics.parameters()):
            nn.init.uniform_(p, -INIT_SCALE, INIT_SCALE)
    return encoder, heads, centers, critics


def batch_tensors(rows):
    """Right-padded ids (pad id 0: the mask leaves it out), the attention mask, real tokens."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask, sum(len(r) for r in rows)


# ---------------------------------------------------------------- training


def l2_softmax_loss(torch, u, layer, labels, alpha, constrained):
    x = u / u.norm(dim=1, keepdim=True).clamp_min(MIN_NORM) * alpha if constrained else u
    return torch.nn.functional.cross_entropy(layer(x), labels)


def updated_centers(torch, x, c, labels, rate):
    """center_loss.rs `updated_centers` (Wen et al. eq. 4)."""
    diff = torch.zeros_like(c).index_add_(0, labels, c[labels] - x)
    counts = torch.zeros(c.shape[0], 1).index_add_(0, labels, torch.ones(len(labels), 1))
    return c - diff / (counts + 1.0) * rate


class Trainer:
    def __init__(self, torch, recipe, tasks, encoder, heads, centers, critics):
        self.torch, self.recipe, self.tasks = torch, recipe, tasks
        self.encoder, self.heads, self.centers, self.critics = encoder, heads, centers, critics
        self.spec = recipe["optimizer"]
        self.seed = int(recipe.get("seed", 1))
        self.critic_optims = {}
        for t in tasks:
            if t["objective"] == "adversarial_language":
                head = t["params"]["head"]
                self.critic_optims[t["name"]] = make_optimizer(
                    {**self.spec, "lr": num(t["params"].get("lr"), 1e-4)},
                    list(critics[head].parameters()))
        self.positions = {t["name"]: (0, 0) for t in tasks}

    def encode(self, rows, grad=True):
        ids, mask, tokens = batch_tensors(rows)
        if grad:
            return self.encoder(ids, mask), tokens
        with self.torch.no_grad():
            return self.encoder(ids, mask), tokens

    def critic_updates(self, task, adv, step):
        """trainer.rs `Loop::inner_loop`: `critic_steps` updates of the critic alone."""
        torch = self.torch
        p = adv["params"]
        critic = self.critics[p["head"]]
        clip = num((self.recipe["model"]["heads"][p["head"]]).get("clip"), 0.01)
        draws = random.Random(f"critic:{self.seed}:{step}")
        for _ in range(int(p.get("critic_steps", 5))):
            index = draws.choice(task["data"].batches)
            own_index = draws.choice(adv["data"].batches)
            if p.get("parallel"):
                # `X -> en` pairs: the English side against its translations.
                pairs = [adv["data"].examples[i] for i in own_index]
                a_rows, b_rows = [e[0] for e in pairs], [e[1] for e in pairs]
            else:
                a_rows = [task["data"].examples[i][0] for i in index]
                b_rows = [adv["data"].examples[i][0] for i in own_index]
            a, _ = self.encode(a_rows, grad=False)
            b, _ = self.encode(b_rows, grad=False)
            loss = -(critic(a).mean() - critic(b).mean())
            optim = self.critic_optims[adv["name"]]
            optim.zero_grad(set_to_none=True)
            loss.backward()
            optim.step()
            with torch.no_grad():
                for w in critic.parameters():
                    w.clamp_(-clip, clip)

    def step(self, optimizer, params, stage_steps, step):
        torch = self.torch
        t = self.mixture.pick(step)
        task = self.tasks[t]
        joint = [self.tasks[j] for j in task["joint"]]
        for adv in (j for j in joint if j["objective"] == "adversarial_language"):
            self.critic_updates(task, adv, step)
        index, self.positions[task["name"]] = task["data"].batch_at(self.positions[task["name"]])
        ex = [task["data"].examples[i] for i in index]
        u, tokens = self.encode([e[0] for e in ex])
        labels = torch.tensor([e[1] for e in ex], dtype=torch.long)
        deferred = []
        loss = None
        for k in [task] + joint:
            p = k["params"]
            if k["objective"] == "l2_softmax":
                alpha = num(self.recipe["model"]["heads"][p["head"]].get("alpha"), 16.0)
                part = l2_softmax_loss(torch, u, self.heads[p["head"]], labels, alpha,
                                       p.get("constrained", True))
            elif k["objective"] == "center_loss":
                c = self.centers[p["head"]]
                part = num(p["lambda"]) * ((u - c[labels]) ** 2).sum() / (2.0 * len(ex))
                deferred.append((p["head"], u.detach(), labels, num(p.get("center_lr"), 0.5)))
            else:
                own_index, self.positions[k["name"]] = k["data"].batch_at(self.positions[k["name"]])
                critic = self.critics[p["head"]]
                if p.get("parallel"):
                    pairs = [k["data"].examples[i] for i in own_index]
                    a, n_a = self.encode([e[0] for e in pairs])
                    b, n_b = self.encode([e[1] for e in pairs])
                    tokens += n_a + n_b
                else:
                    a = u
                    b, n_b = self.encode([k["data"].examples[i][0] for i in own_index])
                    tokens += n_b
                part = num(p["lambda"]) * (critic(a).mean() - critic(b).mean())
            part = part if k is task or k["weight"] == 1.0 else part * k["weight"]
            loss = part if loss is None else loss + part
        lr = learning_rate(self.spec, step, stage_steps, self.steps_per_epoch)
        value = update(torch, optimizer, params, loss, self.spec.get("grad_clip"), lr)
        for head, x, y, rate in deferred:
            self.centers[head] = updated_centers(torch, x, self.centers[head], y, rate)
        return task["name"], value, tokens


def main() -> int:
    args, torch = start(__doc__)
    run, recipe, _ = run_recipe(args, tokenizer=False)
    folder = run / "peer-model"
    if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
        fail(f"{folder}: missing the encoder's starting weights; write them with "
             f"`harness export {run} --out {folder}` (a run of the same recipe)")
    setup = time.perf_counter()
    train = recipe.get("train") or {}
    tok = Tokenizer(folder, int(train.get("max_len", 250)))
    tasks = compile_tasks(run, recipe, tok)
    seed = int(recipe.get("seed", 1))
    torch.manual_seed(seed)
    random.seed(seed)
    encoder, heads, centers, critics = build_model(recipe, folder, classes_of(run, recipe, tasks))
    for m in (encoder, heads, critics):
        m.train()
    stages = recipe.get("stages") or {}
    if any(int(k) != 1 for k in stages):
        fail("stages after the first are not part of this trainer")
    frozen = list((stages.get(1) or stages.get("1") or {}).get("frozen") or [])
    for g in frozen:
        if g == "encoder.embeddings":
            for p in encoder.bert.embeddings.parameters():
                p.requires_grad_(False)
        elif g == "encoder":
            for p in encoder.parameters():
                p.requires_grad_(False)
        elif g.startswith("heads.") and g[len("heads."):] in heads:
            for p in heads[g[len("heads."):]].parameters():
                p.requires_grad_(False)
        else:
            fail(f"frozen group `{g}` is not part of this trainer")
    params = [p for p in list(encoder.parameters()) + list(heads.parameters()) if p.requires_grad]
    optimizer = make_optimizer(recipe["optimizer"], params)
    trainer = Trainer(torch, recipe, tasks, encoder, heads, centers, critics)
    own = [t for t in tasks if t["joint_with"] is None]
    trainer.mixture = Mixture([t["weight"] if t["joint_with"] is None else None for t in tasks], seed)
    trainer.steps_per_epoch = sum(len(t["data"].batches) for t in own)
    if train.get("steps") is not None:
        total = int(train["steps"])
    else:
        total = int(train.get("epochs") or 1) * trainer.steps_per_epoch
    steps = min(args.steps, total)
    summary = ", ".join(f"{t['name']}: {len(t['data'].examples)} examples in {len(t['data'].batches)} batches"
                        for t in tasks if t["data"] is not None)
    print(f"setup {time.perf_counter() - setup:.1f} s; {summary}; training steps 1-{steps} of {total}; "
          f"{sum(p.numel() for p in params)} parameters trained; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads", file=sys.stderr)

    meter = Meter(args.log)
    for step in range(steps):
        started = time.perf_counter()
        name, value, tokens = trainer.step(optimizer, params, total, step)
        meter.add(step, name, value, tokens, time.perf_counter() - started)
    print(meter.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
