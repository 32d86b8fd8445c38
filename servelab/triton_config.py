"""Change a served model's config.pbtxt and reload it while Triton keeps running.

Introduced in notebook 6.

    from servelab import triton_config
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
labenv.triton_url().
"""

from __future__ import annotations

import difflib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from servelab import labenv
from servelab.model_repository import to_cpu
from servelab.paths import model_repository_dir

ModelConfig = model_config_pb2.ModelConfig


def _http(url: str | None) -> str:
    url = (url or labenv.triton_url()).rstrip("/")
    return url if "://" in url else f"http://{url}"


def config_path(model: str, repo: Path | str | None = None) -> Path:
    return Path(repo or model_repository_dir()) / model / "config.pbtxt"


def parse_config(text: str) -> ModelConfig:
    """config.pbtxt text -> ModelConfig; text_format.ParseError names any unknown field."""
    return text_format.Parse(text, ModelConfig())


# ---------------------------------------------------------------- talking to Triton


def model_ready(model: str, url: str | None = None, timeout: float = 5.0) -> bool:
    try:
        return (
            requests.get(f"{_http(url)}/v2/models/{model}/ready", timeout=timeout).status_code
            == 200
        )
    except requests.RequestException:
        return False


def served_config(model: str, url: str | None = None, timeout: float = 10.0) -> dict:
    """The config Triton is using now (GET /v2/models/<model>/config), as JSON."""
    resp = requests.get(f"{_http(url)}/v2/models/{model}/config", timeout=timeout)
    resp.raise_for_status()
    return resp.json()


def load_model(
    model: str, url: str | None = None, timeout: float = 300.0
) -> tuple[bool, float, str]:
    """POST /v2/repository/models/<model>/load and wait for READY: (ok, seconds, Triton's error or
    '')."""
    base = _http(url)
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
        return False, time.perf_counter() - start, message
    deadline = start + timeout
    while not model_ready(model, base):  # the load call returns once loaded; this is a safety net
        if time.perf_counter() > deadline:
            return False, time.perf_counter() - start, f"{model} not READY within {timeout:.0f} s"
        time.sleep(0.2)
    return True, time.perf_counter() - start, ""


def unload_model(model: str, url: str | None = None, timeout: float = 120.0) -> str:
    """POST /v2/repository/models/<model>/unload and wait until it is no longer READY: 'unloaded'
    or the error."""
    base = _http(url)
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


# ---------------------------------------------------------------- editing the text itself


def _top_level_fields(text: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every top-level field of a config.pbtxt text, skipping comments and
    strings; end includes the field's block ({...} or [...]) or value, and the rest of its line."""
    fields, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i + 1
            continue
        start = i
        while i < n and (text[i].isalnum() or text[i] == "_"):
            i += 1
        name = text[start:i]
        if not name:
            raise ValueError(
                f"unexpected {text[start]!r} at top level of the config (position {start})"
            )
        depth, in_string = 0, False
        while i < n:
            c = text[i]
            if in_string:
                in_string = not (c == '"' and text[i - 1] != "\\")
            elif c == '"':
                in_string = True
            elif c == "#":
                i = text.find("\n", i)
                i = n if i < 0 else i
                continue
            elif c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    i += 1
                    break
            elif c == "\n" and depth == 0 and text[start:i].strip().rstrip(":").strip() != name:
                break
            i += 1
        line_end = text.find("\n", i)
        end = n if line_end < 0 else line_end + 1
        if text[i:end].strip().startswith("#") or not text[i:end].strip():
            i = end
        fields.append((name, start, i))
    return fields


def _identity(text: str, name: str, start: int, end: int) -> str:
    """A field's identity: its name, and for a `parameters` entry (a map) its key as well."""
    if name == "parameters":
        key = re.search(r'key\s*:\s*"([^"]*)"', text[start:end])
        return f"parameters[{key.group(1) if key else ''}]"
    return name


def field_text(text: str, name: str) -> str:
    """The top-level field `name` of a config.pbtxt text as written there ('' if it has none):
    a block a student wrote in the file, to apply again with edit()."""
    return next((text[a:b].strip() for n, a, b in _top_level_fields(text) if n == name), "")


def replace_fields(text: str, fragment: str, remove: tuple[str, ...] = ()) -> str:
    """text with each top-level field of `fragment` put in place of the field of that name (added at
    the end if there is none; `parameters` entries are matched by their key), and the fields named
    in `remove` taken out; everything else untouched."""
    new_fields = {
        _identity(fragment, n, a, b): fragment[a:b].strip()
        for n, a, b in _top_level_fields(fragment)
    }
    out, last, done = [], 0, set()
    for name, a, b in _top_level_fields(text):
        ident = _identity(text, name, a, b)
        if ident in new_fields or name in remove or ident in remove:
            out.append(text[last:a])
            if ident in new_fields and ident not in done:
                out.append(new_fields[ident] + "\n")
                done.add(ident)
            last = b
    out.append(text[last:])
    result = "".join(out)
    missing = [v for k, v in new_fields.items() if k not in done]
    if missing:
        result = result.rstrip("\n") + "\n\n" + "\n".join(missing) + "\n"
    return result


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
    """
    say = print if verbose else (lambda *a, **k: None)
    path = config_path(model, repo)
    old_text = path.read_text()
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


def _instances_changed(old_text: str | None, new_text: str) -> bool:
    if old_text is None:
        return False
    try:
        return list(parse_config(old_text).instance_group) != list(
            parse_config(new_text).instance_group
        )
    except text_format.ParseError:
        return True


def _reload(
    model: str,
    path: Path,
    old_text: str | None,
    changes: str,
    url,
    timeout,
    say,
    restore_on_error: bool = True,
) -> ReloadResult:
    """Load the model again from `path`. When its instances changed, unload it first: Triton would
    otherwise only add or remove instances, and the instances it keeps (and even the ones it adds)
    see the old instance count, so each would keep its old share of the CPU's cores."""
    fresh = _instances_changed(old_text, path.read_text())
    say(
        f"wrote {path}; asking Triton at {_http(url)} to load {model} again"
        + (
            " (instances changed: unloaded first, so every instance starts with the new config)"
            if fresh
            else ""
        )
        + " ...",
        flush=True,
    )
    start = time.perf_counter()
    if fresh:
        unload_model(model, url, timeout)
    ok, _, error = load_model(model, url, timeout)
    result = ReloadResult(model, ok, time.perf_counter() - start, changes, error)
    if ok:
        try:
            result.served = served_config(model, url)
        except requests.RequestException:
            pass
        groups = result.served.get("instance_group", [])
        where = ", ".join(
            f"{g.get('count')} x {g.get('kind')}"
            + (f" on GPUs {g['gpus']}" if g.get("gpus") else "")
            for g in groups
        )
        say(f"{result}" + (f" (instances: {where})" if where else ""))
    else:
        if restore_on_error and old_text is not None:
            path.write_text(old_text)
            if not model_ready(
                model, url
            ):  # unloaded for the change: bring the previous config back
                load_model(model, url, timeout)
        result.still_serving = model_ready(model, url)
        say(
            f"{result}"
            + (
                "\nThe previous config.pbtxt was put back in the repository."
                if restore_on_error
                else ""
            )
        )
    return result


# ---------------------------------------------------------------- instances over the GPUs


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
    kinds = model_config_pb2.ModelInstanceGroup.Kind
    return [
        {"kind": kinds.Name(g.kind), "count": g.count or 1, "gpus": list(g.gpus)}
        for g in config.instance_group
    ]


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
