#!/usr/bin/env python3
"""Writes tests/fixtures/transformer_parity.safetensors: a tiny transformer sentence encoder
in PyTorch, for crates/model/tests/transformer_parity.rs (harness's `transformer` encoder,
crates/model/src/encoder/transformer.rs, must give the same numbers).

    python3 scripts/make_transformer_fixture.py [--out PATH] [--setup-only]

The reference is PyTorch's own layer, not a re-implementation:
`nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, nhead, d_ff, dropout=0,
activation="relu", batch_first=True, norm_first=True), layers, norm=nn.LayerNorm(d_model))`,
fed `sqrt(d_model) * projection(embedding(ids)) + sinusoidal positions` and the key padding
mask, its output zeroed at padding and mean-pooled over the real tokens. Sizes: vocab 23,
embed 12 (so the embed -> d_model projection is exercised), d_model 16, 2 heads, d_ff 32,
2 layers, no character n-grams, no dropout. Every weight is drawn from torch.manual_seed(0),
LayerNorm gains and biases included (so that they are checked too).

Tensors (float32 unless noted):
- the model's weights under PyTorch's names: `embedding.weight` [23, 12],
  `projection.weight` [16, 12] / `.bias`, `layers.{i}.self_attn.in_proj_weight` [48, 16],
  `…in_proj_bias`, `…self_attn.out_proj.weight/bias`, `…linear1/linear2.weight/bias`,
  `…norm1/norm2.weight/bias`, `norm.weight/bias` (the Rust test maps `in_proj_weight` to
  burn's `in_proj.weight` and loads the rest with burn-store's PyTorch adapter);
- `input.ids` (int64) [3, 7] and `input.mask` [3, 7] (1 at real tokens; lengths 7, 4, 2);
- `expected.states` [3, 7, 16] (final LayerNorm output, zero at padding) and
  `expected.sentence` [3, 16] (their mean over real tokens);
- `loss.weight` [16] and the gradients of `sum(sentence @ loss.weight)`:
  `grad.embedding.weight`, `grad.layers.0.self_attn.in_proj_weight`,
  `grad.layers.1.linear1.weight`, `grad.norm.weight` (PyTorch layouts).

The first run makes the venv of scripts/pyenv.py (torch, safetensors) and re-runs itself in it.
"""

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pyenv  # noqa: E402

VOCAB, EMBED, D_MODEL, HEADS, D_FF, LAYERS = 23, 12, 16, 2, 32, 2
SENTENCES = [[5, 9, 2, 17, 22, 3, 3], [1, 8, 8, 3], [14, 3]]


def positions(time, d):
    """Vaswani et al. §3.5 in float64, rounded once (as harness's `positions`)."""
    import torch

    pos = torch.arange(time, dtype=torch.float64)[:, None]
    i = torch.div(torch.arange(d), 2, rounding_mode="floor").to(torch.float64)
    angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), 2.0 * i / d)
    table = torch.where(torch.arange(d) % 2 == 0, torch.sin(angle), torch.cos(angle))
    return table.to(torch.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parent.parent
    ap.add_argument("--out", default=str(root / "tests/fixtures/transformer_parity.safetensors"))
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    pyenv.activate(["torch", "safetensors", "numpy"], setup_only=args.setup_only)

    import torch
    from torch import nn
    from safetensors.torch import save_file

    torch.manual_seed(0)
    embedding = nn.Embedding(VOCAB, EMBED)
    projection = nn.Linear(EMBED, D_MODEL)
    layer = nn.TransformerEncoderLayer(
        D_MODEL, HEADS, D_FF, dropout=0.0, activation="relu", batch_first=True, norm_first=True
    )
    encoder = nn.TransformerEncoder(
        layer, LAYERS, norm=nn.LayerNorm(D_MODEL), enable_nested_tensor=False
    )
    with torch.no_grad():
        for p in embedding.parameters():
            p.normal_(0.0, 0.5)
        for name, p in list(projection.named_parameters()) + list(encoder.named_parameters()):
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            else:
                p.uniform_(-0.3, 0.3)
    encoder.eval()

    batch, time = len(SENTENCES), max(map(len, SENTENCES))
    ids = torch.zeros(batch, time, dtype=torch.int64)
    mask = torch.zeros(batch, time)
    for r, s in enumerate(SENTENCES):
        ids[r, : len(s)] = torch.tensor(s)
        mask[r, : len(s)] = 1.0

    x = projection(embedding(ids)) * math.sqrt(D_MODEL) + positions(time, D_MODEL)
    states = encoder(x, src_key_padding_mask=mask == 0) * mask[:, :, None]
    sentence = states.sum(1) / mask.sum(1, keepdim=True)
    loss_weight = torch.linspace(-1.0, 1.0, D_MODEL)
    (sentence @ loss_weight).sum().backward()

    tensors = {"embedding.weight": embedding.weight}
    tensors.update({f"projection.{k}": v for k, v in projection.named_parameters()})
    tensors.update(dict(encoder.named_parameters()))
    tensors = {k: v.detach().clone().contiguous() for k, v in tensors.items()}
    grads = {
        "embedding.weight": embedding.weight.grad,
        "layers.0.self_attn.in_proj_weight": encoder.layers[0].self_attn.in_proj_weight.grad,
        "layers.1.linear1.weight": encoder.layers[1].linear1.weight.grad,
        "norm.weight": encoder.norm.weight.grad,
    }
    tensors.update({f"grad.{k}": g.detach().clone().contiguous() for k, g in grads.items()})
    tensors["input.ids"] = ids
    tensors["input.mask"] = mask
    tensors["expected.states"] = states.detach().contiguous()
    tensors["expected.sentence"] = sentence.detach().contiguous()
    tensors["loss.weight"] = loss_weight
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    # One metadata entry: the file is byte-identical from run to run (the order of several
    # is not fixed).
    producer = f"scripts/make_transformer_fixture.py, torch {torch.__version__}"
    save_file(tensors, args.out, metadata={"producer": producer})
    print(f"{args.out}: {len(tensors)} tensors, {Path(args.out).stat().st_size} bytes")


if __name__ == "__main__":
    main()
