#!/usr/bin/env python3
"""A sentence-transformers folder with a template's architecture and files but random weights,
for measuring encoding speed where the real weights cannot be had (a machine that reaches no
package registry, and too little room to carry the model there).

    python3 scripts/random_bert_folder.py TEMPLATE OUT [--seed 0]

TEMPLATE is a sentence-transformers BERT folder (all-MiniLM-L6-v2's, or the one `harness
export` writes for multilingual-e5-small); every file of it but the weights is copied into OUT
(`tokenizer.json`, `config.json`, `modules.json`, pooling, ...), and OUT/model.safetensors gets
a transformers `BertModel` of TEMPLATE's `config.json` with its own random initialisation
(normal, std `initializer_range`), seeded. Throughput equals the real model's (the same
shapes and operations); the vectors are meaningless, but harness and sentence-transformers
must still agree on them. Needs torch, transformers and safetensors (the GPU machine's
python3 has them).
"""

import argparse
import shutil
import sys
from pathlib import Path

WEIGHTS = {"model.safetensors", "pytorch_model.bin"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("template", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.template / "config.json").is_file():
        print(f"{args.template}/config.json: missing; pass a sentence-transformers BERT folder",
              file=sys.stderr)
        return 2
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.template.rglob("*"):
        if path.is_file() and path.name not in WEIGHTS:
            target = args.out / path.relative_to(args.template)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    torch.manual_seed(args.seed)
    model = BertModel(BertConfig.from_json_file(str(args.template / "config.json")))
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    tmp = args.out / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(args.out / "model.safetensors")
    n = sum(v.numel() for v in tensors.values())
    print(f"{args.out}: {len(tensors)} tensors, {n:,} parameters, seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
