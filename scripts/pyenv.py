"""The Python environment of harness's scripts: one virtual environment, pinned versions.

`scripts/bench_st.py`, `scripts/laser_torch.py`, `scripts/bench_torch_laser.py`,
`scripts/bench_torch_muse.py`, `scripts/bench_torch_xnli.py`, `scripts/bench_torch_emu.py`,
`scripts/mteb_load_results.py`
and `scripts/bench_senteval.py` run in one venv under ~/.cache/harness-bench/venv (or
$HARNESS_BENCH_VENV). Each script names the packages it needs; the first run installs those
that are missing at the versions pinned here, later runs reuse them. CPU-only torch comes from
the PyTorch index where it answers, else from PyPI (run on the CPU either way); everything
else comes from PyPI.

The pins are one consistent set (what pip resolves for sentence-transformers 6.2.0 and
transformers 5.23.0, the versions behind the parity fixtures of ../shared/models/README.md
section 3, and mteb 2.26.24, whose result loader reads `harness export-results --format mteb`
output; scikit-learn and scipy, which `scripts/bench_senteval.py` runs SentEval's classifiers
on, at the versions those two already pull in; installed together with the others, pip keeps
every pin), so every script's subset can live in the same venv. `<venv>/.harness-pins` records
the `name==version` lines installed; a lock file beside the venv keeps two scripts from
installing at once.

Usage from a script (before importing anything from the venv):

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pyenv
    pyenv.activate(["torch", "numpy"], setup_only=args.setup_only)
"""

import fcntl
import os
import subprocess
import sys
from pathlib import Path

# name -> version. Update together: they are resolved as one set.
PINS = {
    "torch": "2.15.0",
    "sentence-transformers": "6.2.0",
    "transformers": "5.23.0",
    "safetensors": "0.8.0",
    "tokenizers": "0.23.3",
    "numpy": "2.4.6",
    "pyyaml": "6.0.3",
    "mteb": "2.26.24",
    "scikit-learn": "1.9.1",
    "scipy": "1.17.1",
}
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def venv_dir() -> Path:
    default = Path.home() / ".cache" / "harness-bench" / "venv"
    return Path(os.environ.get("HARNESS_BENCH_VENV", default))


def in_venv() -> bool:
    """Whether this interpreter is the venv's."""
    return Path(sys.prefix).resolve() == venv_dir().resolve()


def _pin(name: str) -> str:
    return f"{name}=={PINS[name]}"


def _installed(marker: Path) -> dict:
    """The `name==version` lines of the marker (absent: none)."""
    out = {}
    if marker.exists():
        for line in marker.read_text().splitlines():
            name, sep, version = line.strip().partition("==")
            if sep:
                out[name] = version
    return out


def ensure_venv(packages) -> Path:
    """The venv's python, with `packages` (names of PINS) installed at their pinned versions;
    creates the venv and installs what is missing on first use."""
    unknown = [p for p in packages if p not in PINS]
    if unknown:
        raise ValueError(f"no pinned version for {unknown}; add it to scripts/pyenv.py PINS")
    venv = venv_dir()
    python = venv / "bin" / "python"
    marker = venv / ".harness-pins"

    def missing():
        have = _installed(marker)
        return [p for p in packages if have.get(p) != PINS[p]] if python.exists() else list(packages)

    if not missing():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(str(venv) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        todo = missing()  # another process may have installed them meanwhile
        if not todo:
            return python
        print(f"setting up {venv} ({', '.join(_pin(p) for p in todo)}); this happens once",
              file=sys.stderr)
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
        if "torch" in todo:
            cpu = subprocess.run(pip + ["--index-url", CPU_INDEX, "--timeout", "20", "--retries", "0",
                                        _pin("torch")])
            if cpu.returncode != 0:
                print("the CPU-only torch index did not answer; installing torch from PyPI",
                      file=sys.stderr)
                subprocess.run(pip + [_pin("torch")], check=True)
        rest = [_pin(p) for p in todo if p != "torch"]
        if rest:
            subprocess.run(pip + rest, check=True)
        have = _installed(marker)
        have.update({p: PINS[p] for p in todo})
        marker.write_text("\n".join(f"{n}=={v}" for n, v in sorted(have.items())))
    return python


def requested_device() -> str:
    """The `--device` of the calling script's command line (`cpu` when absent)."""
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a == "--device" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--device="):
            return a.split("=", 1)[1]
    return "cpu"


def activate(packages, setup_only=False) -> None:
    """Makes sure the venv has `packages`; outside the venv, re-runs the calling script with
    the venv's python (same arguments) or, with `setup_only`, exits 0 after the setup.

    With `--device cuda[:N]` on the script's command line the venv is not used: its torch is
    the CPU-only build. The script runs on the interpreter it was started with, which must
    import a torch that sees a GPU (on a GPU machine, the python3 that holds CUDA's torch);
    its versions are then that interpreter's, not the pins."""
    if requested_device().startswith("cuda"):
        try:
            import torch
        except ImportError:
            sys.exit(f"{Path(sys.argv[0]).stem}: --device cuda needs a python3 with a CUDA "
                     f"build of torch; {sys.executable} has no torch")
        if not torch.cuda.is_available():
            sys.exit(f"{Path(sys.argv[0]).stem}: --device cuda: the torch of {sys.executable} "
                     f"({torch.__version__}) sees no GPU")
        if setup_only:
            sys.exit(0)
        return
    python = ensure_venv(packages)
    if setup_only:
        sys.exit(0)
    if not in_venv():
        script = os.path.abspath(sys.argv[0])
        os.execv(str(python), [str(python), script] + sys.argv[1:])
