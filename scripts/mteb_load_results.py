#!/usr/bin/env python3
"""Reads a folder written by `harness export-results RUN_DIR --format mteb --out DIR` with
MTEB's own result loader and prints what MTEB made of it, as JSON (tests/mteb_export.rs checks
it against the run's result files).

    python3 scripts/mteb_load_results.py DIR
    python3 scripts/mteb_load_results.py --setup-only

The loader is mteb's `ResultCache(cache_path).load_results(...)` (mteb/cache/result_cache.py,
mteb 2.26.24 as pinned in scripts/pyenv.py), which reads `<cache>/results/<model>/<revision>/
<Task>.json` beside `model_meta.json`; DIR is linked as the `results` folder of a temporary
cache, and nothing is downloaded (`include_remote=False`). Each model's `model_meta.json` is
also validated as a `ModelMeta`, and each task result with `validate_and_filter_scores` against
MTEB's task definition (its eval splits and hf_subsets).

Output:
    {"mteb_version": "...",
     "models": [{"name", "revision", "meta_name", "meta_revision",
                 "tasks": {TASK: {"dataset_revision", "mteb_version",
                                  "scores": {SPLIT: {HF_SUBSET: MAIN_SCORE}},
                                  "languages": {SPLIT: {HF_SUBSET: [LANG, ...]}},
                                  "validated": {SPLIT: {HF_SUBSET: MAIN_SCORE}},
                                  "filled_in": N}}}]}
`scores` is what the loader read; `validated` what is left after MTEB's validation (its eval
splits only, the subsets it knows), without the NaN entries MTEB fills in for subsets the
file lacks (their number: `filled_in`). The first run makes the venv of scripts/pyenv.py (mteb
and its dependencies, CPU torch); the script re-runs itself inside it.
"""

import os
import sys
from pathlib import Path

# mteb imports torch, sentence-transformers and transformers: naming them here installs the
# pinned versions (CPU torch first), not whatever pip would pick for mteb alone.
PACKAGES = ["torch", "numpy", "safetensors", "tokenizers", "transformers",
            "sentence-transformers", "mteb"]

if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in scripts/
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyenv

    pyenv.activate(PACKAGES, setup_only="--setup-only" in sys.argv[1:])

import json  # noqa: E402
import math  # noqa: E402
import tempfile  # noqa: E402


def _finite(x):
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def load(folder: Path) -> dict:
    import mteb
    from mteb.cache import ResultCache
    from mteb.models.model_meta import ModelMeta

    out = {"mteb_version": mteb.__version__, "models": []}
    with tempfile.TemporaryDirectory() as cache:
        os.symlink(folder.resolve(), Path(cache) / "results")
        results = ResultCache(cache_path=cache).load_results(
            include_remote=False, require_model_meta=True, validate_and_filter=False
        )
        for model in results.model_results:
            meta_path = (folder / model.model_name.replace("/", "__").replace(" ", "_")
                         / model.model_revision / "model_meta.json")
            meta = ModelMeta.model_validate_json_resolved(meta_path.read_text(encoding="utf-8"))
            tasks = {}
            for r in model.task_results:
                scores, languages = {}, {}
                for split, entries in r.scores.items():
                    for e in entries:
                        scores.setdefault(split, {})[e["hf_subset"]] = e["main_score"]
                        languages.setdefault(split, {})[e["hf_subset"]] = e["languages"]
                validated, filled = {}, 0
                for split, entries in r.validate_and_filter_scores().scores.items():
                    for e in entries:
                        if _finite(e["main_score"]):
                            validated.setdefault(split, {})[e["hf_subset"]] = e["main_score"]
                        else:
                            filled += 1
                tasks[r.task_name] = {
                    "dataset_revision": r.dataset_revision,
                    "mteb_version": r.mteb_version,
                    "scores": scores,
                    "languages": languages,
                    "validated": validated,
                    "filled_in": filled,
                }
            out["models"].append({
                "name": model.model_name,
                "revision": model.model_revision,
                "meta_name": meta.name,
                "meta_revision": meta.revision,
                "tasks": tasks,
            })
    return out


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--setup-only"]
    if len(args) != 1 or not Path(args[0]).is_dir():
        sys.exit("usage: mteb_load_results.py DIR  (a folder written by "
                 "`harness export-results RUN_DIR --format mteb --out DIR`)")
    print(json.dumps(load(Path(args[0])), indent=1, allow_nan=False))


if __name__ == "__main__":
    main()
