"""What the hand-written PyTorch trainers of harness's recipes share
(`scripts/bench_torch_laser.py`, `scripts/bench_torch_muse.py`): the resolved recipe, the
batches and the task mixture of harness's trainer (crates/train/src/{data.rs,mixture.rs}),
its learning-rate schedule and optimizers (crates/train/src/optim.rs).

Imported by those scripts after `pyenv.activate`; never run on its own.
"""

import argparse
import os
import random
import sys
from pathlib import Path


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
    `--setup-only`) and torch with `--threads` threads: `(args, torch)`."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--run", type=Path, help="a harness run directory (after `harness train`)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, help="default: the recipe's seed")
    ap.add_argument("--log", action="store_true", help="print every step on stderr")
    ap.add_argument("--setup-only", action="store_true", help="create the venv and exit")
    args = ap.parse_args()
    if args.run is None:
        ap.error("--run RUN_DIR is required")
    # Thread counts must be fixed before torch starts its pools.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    return args, torch
