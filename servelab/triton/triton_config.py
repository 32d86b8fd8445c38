"""Change a served model's config.pbtxt and reload it while Triton keeps running.

Introduced in notebook 6.

    from servelab.triton import triton_config
    triton_config.edit("food_classifier", '''
    instance_group [ { count: 2, kind: KIND_GPU } ]
    ''')                                   # your text replaces that field; comments elsewhere stay

edit() is how the notebooks change a config: the text you write replaces the top-level field(s)
of the same name in the file, exactly as written. The result is parsed as Triton's own
ModelConfig protobuf (from tritonclient, so a misspelt field fails here, before Triton sees it);
then edit() shows the unified diff, writes the file, asks Triton to load the model again through
the repository API (POST /v2/repository/models/<model>/load), waits for
/v2/models/<model>/ready and reports how long it took. No image is rebuilt and the server is not
restarted: the repository is a plain folder (local mode) or a folder mounted into the Triton
container (Docker).

If Triton refuses the new config, its error message is reported, the previous config.pbtxt is
put back in the repository, and whether the previously loaded model still answers is checked.

Defaults: the repository of servelab.paths.model_repository_dir(), the server of
labenv.triton_url(). The text itself is edited by servelab/triton/config_text.py; where Triton
puts the instances a config asks for: servelab/triton/instances.py.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
from google.protobuf import text_format

from servelab import labenv, passes
from servelab.passes import node_calls, record
from servelab.paths import STAGING, model_repository_dir
from servelab.triton.config_text import parse_config, replace_fields, to_cpu


def config_path(model: str, repo: Path | str | None = None) -> Path:
    return Path(repo or model_repository_dir()) / model / "config.pbtxt"


def file_text(model: str, repo: Path | str | None = None) -> str:
    """The model's config.pbtxt as the repository holds it now (the node's file: the measure
    pass keeps it, the review pass reads it back)."""
    path = config_path(model, repo)
    return passes.on_node(f"config.pbtxt of {model}", "value", path.read_text)


def to_edit(model: str, step: str) -> tuple[Path, str]:
    """(the config.pbtxt you edit in `step`, its text before your edit), printed as what to open.

    measure: the node's file in the model repository (its text kept in the bundle); review: the
    same, read back. prepare (no node): this notebook's own copy of the model's config, made from
    its source (models_staging/) at the first edit and carried from edit to edit, so each edit
    is made and checked before the lease; what it held before each step is kept in the bundle's
    prepared.json, so running the cell again after your edit still compares with it."""
    if passes.current() != passes.PREPARE or node_calls.STATE["bundle"] is None:
        path = config_path(model)
        before = passes.on_node(f"config.pbtxt of {model} before {step}", "value", path.read_text)
        if passes.measures():
            before = _make_prepared_edit(path, before, step)
    else:
        bundle = node_calls.STATE["bundle"]
        path = bundle.folder / "prepare" / model / "config.pbtxt"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text((STAGING / model / "config.pbtxt").read_text())
        kept = bundle.read(record.PREPARED).get("before_edits", {})
        before = kept.get(step) or path.read_text()
        bundle.record(record.PREPARED, "before_edits", {**kept, step: before})
    print(f"{step}: open {path} in the editor")
    return path, before


def _make_prepared_edit(path: Path, before: str, step: str) -> str:
    """The measure pass: your prepare pass's edit for `step`, made again in the node's file when
    that file is still the one you edited then (else you make it in the editor, as printed).
    Returns the file's text before the edit (also when the cell runs again after it)."""
    prepared = record.prepared_edit(step)
    if prepared is None:
        return before
    if before == prepared["after"]:  # made already (this cell ran before)
        return prepared["before"]
    if before != prepared["before"]:
        print(
            f"{step}: this node's file differs from the copy you edited in the prepare pass, so "
            "make your edit again in the editor; what you changed then:"
        )
        lines = (prepared[k].splitlines(keepends=True) for k in ("before", "after"))
        print("".join(difflib.unified_diff(*lines, "before", "your prepared edit")), end="")
        return before
    path.write_text(prepared["after"])
    print(f"{step}: your prepare pass's edit (made {prepared['made']}) is now in {path}")
    return before


# ---------------------------------------------------------------- talking to Triton


def model_ready(model: str, url: str | None = None, timeout: float = 5.0) -> bool:
    ready = f"{labenv.triton_url(url)}/v2/models/{model}/ready"
    try:
        return requests.get(ready, timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


def served_config(
    model: str, url: str | None = None, timeout: float = 10.0, when: str = ""
) -> dict:
    """The config Triton is using now (GET /v2/models/<model>/config), as JSON; `when` names the
    moment where a notebook reads it more than once (each reading kept apart in the bundle)."""

    def read() -> dict:
        resp = requests.get(f"{labenv.triton_url(url)}/v2/models/{model}/config", timeout=timeout)
        resp.raise_for_status()
        return resp.json()

    return passes.on_node(f"served config {model} {when}".rstrip(), "value", read)


def _refusal(resp) -> str:
    """Triton's error for a refused load, with what to do about the usual ones."""
    try:
        message = resp.json().get("error", resp.text)
    except ValueError:
        message = resp.text
    if resp.status_code == 403:
        message += (
            " (the repository API needs the node's secret in TRITON_ADMIN_KEY: the lab's "
            "Jupyter has it; elsewhere take it from docker/.env or .lab/urls.env)"
        )
    if "failed to poll from model repository" in message:
        message += (
            " (Triton found config.pbtxt invalid; its log names the field: "
            ".lab/logs/triton.log in local mode, `docker logs` of the Triton container "
            "otherwise)"
        )
    return message


def load_model(
    model: str, url: str | None = None, timeout: float = 300.0
) -> tuple[bool, float, str]:
    """POST /v2/repository/models/<model>/load and wait for READY: (ok, seconds, Triton's error or
    ''). The measure pass keeps the answer; the review pass reads it back."""
    load = lambda: _load(model, url, timeout)  # noqa: E731
    return tuple(passes.on_node(f"load {model}", "value", load))


def _load(model: str, url: str | None, timeout: float) -> tuple[bool, float, str]:
    base = labenv.triton_url(url)
    start = time.perf_counter()
    try:
        resp = requests.post(
            f"{base}/v2/repository/models/{model}/load",
            headers=labenv.admin_headers(),
            timeout=timeout,
        )
    except requests.ConnectionError as exc:
        return False, time.perf_counter() - start, f"cannot reach Triton at {base}: {exc}"
    except requests.Timeout:
        return False, time.perf_counter() - start, f"no answer from Triton within {timeout:.0f} s"
    if resp.status_code != 200:
        return False, time.perf_counter() - start, _refusal(resp)
    deadline = start + timeout
    while not model_ready(model, base):  # the load call returns once loaded; this is a safety net
        if time.perf_counter() > deadline:
            return False, time.perf_counter() - start, f"{model} not READY within {timeout:.0f} s"
        time.sleep(0.2)
    return True, time.perf_counter() - start, ""


def model_state(model: str, url: str | None = None, timeout: float = 10.0) -> str | None:
    """The model's state in Triton's repository index (POST /v2/repository/index): READY,
    LOADING, UNLOADING (its instances are still being finalized: their processes still run) or
    UNAVAILABLE (none left); None where the index does not say (not listed, no answer)."""
    try:
        resp = requests.post(
            f"{labenv.triton_url(url)}/v2/repository/index",
            headers=labenv.admin_headers(),
            json={},
            timeout=timeout,
        )
        resp.raise_for_status()
        index = resp.json()
    except (requests.RequestException, ValueError):
        return None
    states = [e.get("state") for e in index if e.get("name") == model]
    return next((s for s in states if s), None)


def unload_model(model: str, url: str | None = None, timeout: float = 120.0) -> str:
    """POST /v2/repository/models/<model>/unload, then wait until it is no longer READY and its
    instances are gone: 'unloaded' or what went wrong.

    Triton answers an unload at once and finalizes the instances afterwards, one Python-backend
    process after another (seconds on a GPU). A load sent meanwhile starts the new instances
    beside the old ones, and the old ones can outlive the new model's READY by seconds (notebook
    6's Triton log on two H200s: docs/results/h200x2/06_triton_benchmarks/). So this waits until
    Triton's repository index no longer says UNLOADING: the next load starts from no instance at
    all, and ends with exactly those its config names."""
    return passes.on_node(f"unload {model}", "value", lambda: _unload(model, url, timeout))


def _unload(model: str, url: str | None, timeout: float) -> str:
    base = labenv.triton_url(url)
    resp = requests.post(
        f"{base}/v2/repository/models/{model}/unload",
        headers=labenv.admin_headers(),
        timeout=timeout,
    )
    if resp.status_code != 200:
        return f"HTTP {resp.status_code}: {resp.text[:300]}"
    deadline = time.perf_counter() + timeout
    while model_ready(model, base):
        if time.perf_counter() > deadline:
            return f"still READY after {timeout:.0f} s"
        time.sleep(0.2)
    while model_state(model, base) == "UNLOADING":  # its instances are being finalized
        if time.perf_counter() > deadline:
            return (
                f"still UNLOADING after {timeout:.0f} s: some of its instances' processes still "
                "run (`nvidia-smi` or `ps` on the node lists them)"
            )
        time.sleep(0.2)
    return "unloaded"


@dataclass
class ReloadResult:
    model: str
    ok: bool
    seconds: float
    diff: str
    error: str = ""
    still_serving: bool | None = None  # after a failed reload: does the previous model answer?
    served: dict = field(default_factory=dict)

    def __str__(self) -> str:
        if self.ok:
            return f"{self.model}: new config loaded in {self.seconds:.1f} s"
        serving = {
            True: "the previously loaded version is still READY and serving",
            False: "the model is NOT ready now",
            None: "",
        }[self.still_serving]
        return (
            f"{self.model}: Triton refused the new config after {self.seconds:.1f} s: "
            f"{self.error}. {serving}"
        )


def _new_text(old_text: str, fragment: str, remove: tuple[str, ...], say) -> str:
    """The config with the fragment applied (KIND_GPU written as KIND_CPU on a CPU-only model),
    checked against Triton's schema."""
    if "KIND_GPU" in fragment and "KIND_CPU" in old_text and "KIND_GPU" not in old_text:
        fragment = to_cpu(fragment)
        say(
            "(this model runs on the CPU here, no GPU: KIND_GPU written as KIND_CPU, without a "
            "gpus list)"
        )
    new_text = replace_fields(old_text, fragment, remove)
    try:
        parse_config(new_text)
    except text_format.ParseError as exc:
        raise ValueError(f"not a valid config.pbtxt for Triton: {exc}") from None
    return new_text


def edit(
    model: str,
    fragment: str = "",
    *,
    remove: tuple[str, ...] = (),
    repo: Path | str | None = None,
    url: str | None = None,
    timeout: float = 300.0,
    verbose: bool = True,
) -> ReloadResult:
    """Apply your edit of the model's config.pbtxt and reload the model in Triton.

    fragment holds top-level fields as you would write them in config.pbtxt; each replaces the
    field of the same name (remove: names of fields to take out). The result must parse as
    Triton's ModelConfig, so a misspelt field fails here, before Triton sees it. Then: the diff,
    the file written as text (your comments and the file's stay), a reload through the repository
    API; if Triton refuses the config, the old file is put back. On a server whose model runs on
    the CPU (no GPU), KIND_GPU in the fragment is written as KIND_CPU, and said so.
    The measure pass keeps what the edit printed; the review pass prints it again, changing
    nothing (and returns None).
    """
    key = f"edit {model}: {' '.join(fragment.split())} {' '.join(remove)}".rstrip()
    return passes.change(key, lambda: _edit(model, fragment, remove, repo, url, timeout, verbose))


def _edit(model, fragment, remove, repo, url, timeout, verbose) -> ReloadResult:
    say = print if verbose else (lambda *a, **k: None)
    path = config_path(model, repo)
    old_text = path.read_text()
    new_text = _new_text(old_text, fragment, remove, say)
    changes = "".join(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"{model}/config.pbtxt (before)",
            tofile=f"{model}/config.pbtxt (after)",
        )
    )
    say(changes if changes else f"{model}: config unchanged; reloading it anyway")
    path.write_text(new_text)
    return _reload(model, path, old_text, changes, url, timeout, say)


def reload_edited(
    model: str, before: str, step: str, url: str | None = None, timeout: float = 300.0
) -> ReloadResult:
    """Load the model again after your edit of its config.pbtxt in an editor (the file as you
    saved it; its instances changed: unloaded first). If Triton refuses it, the file goes back to
    `before`, the model loads as it was, and the cell stops saying why. The measure pass keeps
    what it printed; the review pass prints it again."""

    def reload() -> ReloadResult:
        path = config_path(model)
        diff = "".join(
            difflib.unified_diff(before.splitlines(True), path.read_text().splitlines(True))
        )
        return _reload(model, path, before, diff, url, timeout, print)

    result = passes.change(f"reload {model} after your edit of {step}", reload)
    if result is not None and not result.ok:
        raise RuntimeError(
            f"Triton refused the edited config (the file is back as it was): {result.error}"
        )
    return result


def _instances_changed(old_text: str, new_text: str) -> bool:
    try:
        return list(parse_config(old_text).instance_group) != list(
            parse_config(new_text).instance_group
        )
    except text_format.ParseError:
        return True


def _where(served: dict) -> str:
    """The served config's instance groups in words: "2 x KIND_GPU on GPUs [0, 1]"."""
    return ", ".join(
        f"{g.get('count')} x {g.get('kind')}" + (f" on GPUs {g['gpus']}" if g.get("gpus") else "")
        for g in served.get("instance_group", [])
    )


def _reload(model: str, path: Path, old_text: str, changes: str, url, timeout, say) -> ReloadResult:
    """Load the model again from `path`; if Triton refuses, put `old_text` back and load that.
    When its instances changed, unload it first and wait until the old instances are gone
    (unload_model), so the model ends with exactly the instances its config names. Loaded while
    READY, Triton 2.51 would update the instances in place (its "model instance update"): it keeps
    each old instance whose device and group settings, count and name aside, a new one has, and
    those it keeps (and even the ones it adds) see the old instance count, so each would keep its
    old share of the CPU's cores."""
    fresh = _instances_changed(old_text, path.read_text())
    first = (
        " (instances changed: unloaded first, and its instances gone, so every instance starts "
        "with the new config)"
    )
    say(
        f"wrote {path}; asking Triton at {labenv.triton_url(url)} to load {model} again"
        f"{first if fresh else ''} ...",
        flush=True,
    )
    start = time.perf_counter()
    if fresh:
        unloaded = unload_model(model, url, timeout)
        if unloaded != "unloaded":
            say(f"{model}: {unloaded}; loading the new config anyway")
    ok, _, error = load_model(model, url, timeout)
    result = ReloadResult(model, ok, time.perf_counter() - start, changes, error)
    if ok:
        try:
            result.served = served_config(model, url)
        except requests.RequestException:
            pass
        where = _where(result.served)
        say(f"{result}" + (f" (instances: {where})" if where else ""))
        return result
    path.write_text(old_text)
    if not model_ready(model, url):  # unloaded for the change: bring the previous config back
        load_model(model, url, timeout)
    result.still_serving = model_ready(model, url)
    say(f"{result}\nThe previous config.pbtxt was put back in the repository.")
    return result
