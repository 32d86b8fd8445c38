"""Copy the staged Triton models (models_staging/) into a Triton model repository.

Introduced in notebook 5.

    python -m servelab.triton.model_repository [--dest model_repository] [--mode local|docker]
                                        [--kind auto|gpu|cpu]

The repository Triton reads looks like this (one folder per model, one sub-folder per version):

    model_repository/
      food_classifier/        config.pbtxt, 1/model.py, 1/food11.pth   (Python backend)
      food_classifier_onnx/   config.pbtxt, 1/model.onnx               (onnxruntime backend)
      food_classifier_tuned/  config.pbtxt, 1/model.py, 1/food11.pth   (notebook 7: add_model())
      preprocess/             config.pbtxt, 1/model.py                 (notebook 8: add_model())
      food_classifier_ensemble/  config.pbtxt, 1/ (empty)   (notebook 8: preprocess, then ONNX)

mode "docker": the models as staged, for NVIDIA's Triton container (which has the onnxruntime
backend). mode "local": the pip-installed Triton has only the Python backend, so
food_classifier_onnx is the Python-backend stand-in from models_staging/food_classifier_onnx_local
(same name, same inputs and outputs, runs model.onnx with ONNX Runtime).
kind: the staged configs ask for KIND_GPU; without a GPU ("auto" finds none, or "cpu") every
instance group is rewritten to KIND_CPU.

Each model folder is replaced as a whole, so changes made earlier (e.g. by
servelab.triton.triton_config) are reset to the staged version; other folders in the repository
are left alone.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
from pathlib import Path

from servelab import food11
from servelab.paths import (
    MODEL_ONNX,
    MODEL_PTH,
    MODEL_STATE_DICT,
    STAGING,
    model_repository_dir,
)
from servelab.triton.config_text import parse_config, to_cpu

# model name -> (staged folder per mode, files placed in version folder 1/)
MODELS = {
    "food_classifier": (
        {"local": "food_classifier", "docker": "food_classifier"},
        [MODEL_PTH, MODEL_STATE_DICT],
    ),
    "food_classifier_onnx": (
        {"local": "food_classifier_onnx_local", "docker": "food_classifier_onnx"},
        [MODEL_ONNX],
    ),
}
# Placed only when a notebook asks (add_model), so Triton does not load it at every start.
ON_DEMAND_MODELS = {
    "food_classifier_tuned": (
        {"local": "food_classifier_tuned", "docker": "food_classifier_tuned"},
        [MODEL_PTH, MODEL_STATE_DICT],
    ),
    # the ensemble (servelab.ensemble): raw image bytes -> preprocess -> food_classifier_onnx
    "preprocess": ({"local": "preprocess", "docker": "preprocess"}, []),
    "food_classifier_ensemble": (
        {"local": "food_classifier_ensemble", "docker": "food_classifier_ensemble"},
        [],
    ),
}
# what each staged model file is called inside the version folder
PLACED_NAMES = {
    MODEL_PTH: "food11.pth",
    MODEL_STATE_DICT: "food11_state_dict.pth",
    MODEL_ONNX: "model.onnx",
}


def has_gpu(mode: str = "local") -> bool:
    """Is there a GPU the models could use? local: PyTorch must see one; docker: nvidia-smi must
    list one."""
    if mode == "local":
        try:
            import torch

            return bool(torch.cuda.is_available())
        except ImportError:
            pass
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def _copy_file(src: Path, dst: Path) -> None:
    if dst.is_file() and filecmp.cmp(src, dst, shallow=False):
        return
    shutil.copy2(src, dst)


def _ignore(_dir, names):
    return [n for n in names if n in ("__pycache__",) or n.endswith(".pyc")]


def weights_parameter() -> str:
    """A config parameter saying whether the weights are trained, for clients (the Flask UI) to
    show."""
    try:
        weights = food11.read_metadata()["weights"]
    except (FileNotFoundError, KeyError, ValueError):
        weights = "unknown"
    return (
        "\n# Added by servelab.triton.model_repository: "
        '"untrained" unless a trained checkpoint was built\n'
        f'parameters {{ key: "weights" value {{ string_value: "{weights}" }} }}\n'
    )


def _check_weights(models: dict) -> None:
    for model, (sources, weights) in models.items():
        missing = [str(w) for w in weights if not Path(w).is_file()]
        if missing:
            raise FileNotFoundError(
                f"{', '.join(missing)} not found: build the artifacts first (make artifacts)"
            )


def _place(
    model: str,
    sources: dict,
    weights: list,
    dest: Path,
    mode: str,
    gpu: bool,
    keep_config: bool = False,
) -> str:
    """Copy one staged model into dest/model (replacing it); return a line saying what is there.

    keep_config: a config.pbtxt already there stays as it is (a student's edits survive a restart);
    the code and weights beside it are refreshed from the staged files."""
    src = STAGING / sources[mode]
    target = dest / model
    kept = None
    if keep_config and (target / "config.pbtxt").is_file():
        kept = (target / "config.pbtxt").read_text()
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(src, target, ignore=_ignore)
    version = target / "1"
    version.mkdir(exist_ok=True)
    for w in weights:
        _copy_file(Path(w), version / PLACED_NAMES[w])
    note = _config_placed(target / "config.pbtxt", kept, gpu, f"--mode {mode} --dest {dest}")
    if sources[mode] != model:
        note += f", from {src.name}/ (local stand-in)"
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    return f"  {model}/: {', '.join(files)}{note}"


def _config_placed(config: Path, kept: str | None, gpu: bool, where: str) -> str:
    """Write the staged config (KIND_CPU without a GPU, the weights parameter added), or the
    student's edited one `kept` where it still fits this mode; return a note saying which."""
    note = ""
    if not gpu:
        config.write_text(to_cpu(config.read_text()))
        note = ", instance kind rewritten to KIND_CPU"
    staged = config.read_text() + weights_parameter()
    config.write_text(staged)
    kept_backend = _backend(kept) if kept is not None else None
    if kept_backend and kept_backend != _backend(staged):
        # e.g. a Docker-mode config (backend "onnxruntime") in local mode, which has no such backend
        config.with_name("config.pbtxt.previous").write_text(kept)
        return (
            f", the config.pbtxt there named backend {kept_backend!r}, which this mode's model "
            "does not use: staged config placed, the previous one saved as config.pbtxt.previous"
        )
    if kept is not None and kept != staged:
        config.write_text(kept)
        return (
            f", your edited config.pbtxt KEPT (back to the staged one: "
            f"python -m servelab.triton.model_repository {where})"
        )
    return note


def _backend(config_text: str) -> str | None:
    """The Triton backend a config.pbtxt names, or None if it does not parse (a config being
    edited is kept)."""
    from google.protobuf import text_format

    try:
        return parse_config(config_text).backend or None
    except text_format.ParseError:
        return None


def _uses_gpu(mode: str, kind: str) -> bool:
    if mode not in ("local", "docker"):
        raise ValueError(f"mode must be 'local' or 'docker', not {mode!r}")
    if kind not in ("auto", "gpu", "cpu"):
        raise ValueError(f"kind must be 'auto', 'gpu' or 'cpu', not {kind!r}")
    return has_gpu(mode) if kind == "auto" else kind == "gpu"


def populate(
    dest: Path | str | None = None,
    mode: str = "local",
    kind: str = "auto",
    verbose: bool = True,
    keep_configs: bool = False,
) -> list[str]:
    """Copy every staged model into the repository at dest; return the model names placed there.

    keep_configs (what `make up` uses): config.pbtxt files already in dest are kept, so restarting
    the stack after a crash does not undo a student's edits; each kept one is named."""
    gpu = _uses_gpu(mode, kind)
    dest = Path(dest or model_repository_dir()).resolve()
    say = print if verbose else (lambda *a, **k: None)
    _check_weights(MODELS)
    dest.mkdir(parents=True, exist_ok=True)
    say(
        f"Triton model repository: {dest} (mode {mode}, instances on {'GPU' if gpu else 'CPU'}"
        f"{'' if kind != 'auto' else ', detected'})"
    )
    for model, (sources, weights) in MODELS.items():
        say(_place(model, sources, weights, dest, mode, gpu, keep_config=keep_configs))
    return list(MODELS)


def add_model(
    model: str,
    dest: Path | str | None = None,
    mode: str = "local",
    kind: str = "auto",
    verbose: bool = True,
) -> Path:
    """Copy an on-demand model (ON_DEMAND_MODELS) into the repository; Triton loads it on demand."""
    if model not in ON_DEMAND_MODELS:
        raise ValueError(f"{model!r} is not an on-demand model ({', '.join(ON_DEMAND_MODELS)})")
    gpu = _uses_gpu(mode, kind)
    _check_weights({model: ON_DEMAND_MODELS[model]})
    dest = Path(dest or model_repository_dir()).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    line = _place(model, *ON_DEMAND_MODELS[model], dest, mode, gpu)
    if verbose:
        print(f"Triton model repository: {dest}\n{line}")
    return dest / model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dest",
        type=Path,
        default=None,
        help=f"repository folder (default {model_repository_dir()})",
    )
    parser.add_argument(
        "--mode",
        choices=("local", "docker"),
        default="docker",
        help="docker: NVIDIA's Triton image (onnxruntime backend); local: pip-installed Triton",
    )
    parser.add_argument(
        "--kind",
        choices=("auto", "gpu", "cpu"),
        default="auto",
        help="instance kind; auto = GPU if one is found",
    )
    args = parser.parse_args(argv)
    populate(args.dest, mode=args.mode, kind=args.kind)


if __name__ == "__main__":
    main()
