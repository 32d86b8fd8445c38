"""Where Triton puts a model's instances: by its config (placement, instance_count), the fragment
that puts them on every GPU (instance_group), and the Python-backend processes this machine shows
(python_stubs).

Introduced in notebook 6.
"""

from __future__ import annotations

import subprocess

from servelab import passes
from servelab.triton.config_text import parse_config


def instance_group(count: int, n_gpus: int) -> str:
    """The instance_group that puts `count` instances on every GPU of a server with `n_gpus`
    GPUs, listed by number (`gpus: [ 0, 1 ]` on the class's 2-GPU node), or `count` CPU
    instances where the server has none. Notebook 6 writes its instance steps with it."""
    if n_gpus <= 0:
        return f"instance_group [ {{ count: {count}, kind: KIND_CPU }} ]"
    gpus = ", ".join(str(i) for i in range(n_gpus))
    return f"instance_group [ {{ count: {count}, kind: KIND_GPU, gpus: [ {gpus} ] }} ]"


def _groups(config) -> list[dict]:
    """The instance groups of a config given as config.pbtxt text, a ModelConfig, or the served
    config's JSON, as dicts {kind, count, gpus}."""
    if isinstance(config, str):
        config = parse_config(config)
    if isinstance(config, dict):
        return [
            {
                "kind": g.get("kind", "KIND_AUTO"),
                "count": int(g.get("count", 1)),
                "gpus": list(g.get("gpus", [])),
            }
            for g in config.get("instance_group", [])
        ]
    return [
        {"kind": _kind_name(g), "count": g.count or 1, "gpus": list(g.gpus)}
        for g in config.instance_group
    ]


def _kind_name(group) -> str:
    """An instance group's kind by its name (KIND_GPU), as its schema names the number."""
    return group.DESCRIPTOR.fields_by_name["kind"].enum_type.values_by_number[group.kind].name


def placement(config, n_gpus: int) -> dict[str, int]:
    """Where Triton puts a config's instances on a server with `n_gpus` GPUs: instances per
    device, e.g. {"GPU 0": 2, "GPU 1": 2} or {"CPU": 2}.

    Triton's rules: a KIND_GPU group puts `count` instances on each GPU of its `gpus` list, or on
    every GPU of the server without one; KIND_AUTO is KIND_GPU where there is a GPU, else
    KIND_CPU; no instance_group at all is one instance per GPU (one CPU instance without GPU).
    A KIND_GPU group on a server without (that) GPU does not load: ValueError says why."""
    groups = _groups(config) or [{"kind": "KIND_AUTO", "count": 1, "gpus": []}]
    where: dict[str, int] = {}
    for group in groups:
        kind = group["kind"]
        if kind == "KIND_AUTO":
            kind = "KIND_GPU" if n_gpus > 0 else "KIND_CPU"
        if kind != "KIND_GPU":
            device = "CPU" if kind == "KIND_CPU" else "the model's choice"
            where[device] = where.get(device, 0) + group["count"]
            continue
        gpus = group["gpus"] or list(range(n_gpus))
        if not gpus:
            raise ValueError("a KIND_GPU instance group needs a GPU; this server has none")
        missing = [g for g in gpus if not 0 <= g < n_gpus]
        if missing:
            raise ValueError(
                f"the group lists GPU {missing[0]}, but the server has {n_gpus} GPU(s): "
                f"gpus: [ {', '.join(str(i) for i in range(n_gpus))} ] at most"
            )
        for gpu in gpus:
            where[f"GPU {gpu}"] = where.get(f"GPU {gpu}", 0) + group["count"]
    return where


def instance_count(config, n_gpus: int) -> int:
    """How many instances (processes, for the Python backend) a config makes: the sum of
    placement()."""
    return sum(placement(config, n_gpus).values())


def python_stubs(model: str, repository: str | None = None) -> list[dict] | None:
    """The Python-backend processes ("stubs") serving `model`, one per instance, as this machine's
    process list shows them: [{pid, instance, cpu_pct}], or None where Triton's processes are not
    visible from here (Docker: the Triton container's processes are its own; read `nvidia-smi` or
    `ps` on the node instead). `repository` keeps only the stubs of that model repository (several
    servers may run on one machine). The measure pass keeps the list; the review pass reads it."""
    stubs = lambda: _python_stubs(model, repository)  # noqa: E731
    return passes.on_node(f"Python-backend stubs of {model}", "value", stubs)


def _python_stubs(model: str, repository: str | None) -> list[dict] | None:
    try:
        listing = subprocess.run(
            ["ps", "-eo", "pid=,pcpu=,args="], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    stubs, found_any = [], False
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[2].endswith("triton_python_backend_stub"):
            continue
        found_any = True
        args = parts[3:]
        model_py = args[0] if args else ""
        if f"/{model}/" not in model_py or (
            repository and not model_py.startswith(str(repository))
        ):
            continue
        instance = next((a for a in args if a.startswith(f"{model}_")), "?")
        stubs.append({"pid": int(parts[0]), "instance": instance, "cpu_pct": float(parts[1])})
    return stubs if found_any else None
