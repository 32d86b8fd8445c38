"""Checks of what you write in an exercise, answered in your terms before anything long runs.

Introduced in notebook 3.

An exercise cell holds a blank, `...`, that you replace with your answer; the cell after it hands
your answer to one of these checks. A check returns your answer when it does what the step
needs, so the next cell can use it. Otherwise it stops the notebook with one sentence that says
what to write and where to look (a NotYet, which Jupyter shows without a traceback):

    line = exercises.perf_line(line, "6.1", "the step measures 8 requests in flight",
                               needs={"-m": "food_classifier", "--concurrency-range": "8"})
    text = exercises.config_fragment(text, "6.3", "two instances of the model on every GPU",
                                     needs=exercises.on_every_gpu(2, N_GPUS))
    line = exercises.curl_line(line, "5.6", "Triton's statistics of food_classifier",
                               url=f"{TRITON}/v2/models/food_classifier/stats")
    config = exercises.result(config, "5.3", "the config Triton serves",
                              check=lambda c: c["name"] == "food_classifier", hint="...")
    record = exercises.function(send_one, "4.4", "time one request", args=(...),
                                check=exercises.timed_request)
    diff = exercises.file_edit(path, before, "6.3", "set count: 2", needs={...})
    deployment = exercises.deployment_options(deployment, "9.2", "two replicas", FoodClassifier,
                                              needs={"num_replicas": 2})

Every check has the same shape: your answer, the step, what the step needs in words, then what
exactly to look for. A config.pbtxt text is judged by Triton's own schema (the ModelConfig
protobuf that servelab.triton_config parses with), and its instance_group by where Triton puts
the instances; a perf_analyzer line is read as perf_analyzer reads it (servelab.perf_flags), and
a flag that changes what is measured is refused unless the step needs it; a Ray Serve
deployment's options are read as Ray reads them (servelab.serve_options), and likewise an
option the step does not ask for is refused when it changes what is measured. What a step needs
beyond an answer's form (a latency in milliseconds, one model's statistics, instances per GPU)
is judged by what the answer does: servelab.step_needs, whose checks are called here as
exercises.timed_request, exercises.on_every_gpu, ... The command lines' checks live in
servelab/command_lines.py, an answer's blank and NotYet in servelab/answers.py: all are called
as exercises.<name>.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from pathlib import Path

from google.protobuf import text_format

from servelab import config_text, serve_options, step_needs
from servelab.answers import NotYet, blank, not_written, written_text  # noqa: F401
from servelab.command_lines import curl_line, perf_line  # noqa: F401 (exercises.perf_line, ...)

# what a step needs beyond its answer's form (servelab/step_needs.py), called as exercises.<name>
from servelab.step_needs import (  # noqa: F401
    Instances,
    Wrong,
    on_every_gpu,
    on_first_gpu,
    timed_request,
)

# ---------------------------------------------------------------- config.pbtxt text


def _config_needs(config, needs: dict[str, object], step: str, what: str, whose: str) -> None:
    for path, want in needs.items():
        if isinstance(want, Instances):  # judged by where Triton puts them
            try:
                step_needs.check_instances(config, want)
            except Wrong as exc:
                raise NotYet(f"{step}: {what}: {whose} {exc}.") from None
            continue
        got = config_text.field_value(config, path)
        if got is None or got == [] or (want is not None and not _equal(got, want)):
            shown = path if want is None else f"{path}: {_pbtxt(want)}"
            has = "has no" if got is None or got == [] else f"has `{path}: {_pbtxt(got)}`, not"
            raise NotYet(f"{step}: {what}: {whose} {has} `{shown}`.")


def _equal(got, want) -> bool:
    if isinstance(want, (list, tuple)):
        return list(got) == list(want)
    return got == want or str(got) == str(want)


def _pbtxt(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[ " + ", ".join(str(v) for v in value) + " ]"
    return str(value)


def _schema(text: str, step: str, whose: str, where: str):
    try:
        return config_text.parse_config(text)
    except text_format.ParseError as exc:
        raise NotYet(
            f"{step}: {whose} is not config.pbtxt that Triton accepts "
            f"({str(exc).rstrip('.')}): compare it with {where}."
        ) from None


def config_fragment(
    text,
    step: str,
    what: str,
    needs: dict[str, object] | None = None,
    where: str = "the text above it shows the fields",
) -> str:
    """Your config.pbtxt fragment, parsed with Triton's own schema; stops unless it sets every
    field of `needs` ({dotted field: value}, value None: set at all; a repeated message counts by
    its first element, e.g. "instance_group.count")."""
    text = written_text(text, step, "your config.pbtxt fragment, in quotes", what, where)
    config = _schema(text, step, "your fragment", "the config.pbtxt shown above")
    _config_needs(config, needs or {}, step, what, "your fragment")
    return text


def file_edit(
    path,
    before: str,
    step: str,
    what: str,
    needs: dict[str, object] | None = None,
) -> str:
    """A config.pbtxt you edited in an editor: stops while it is unchanged, unparsable for Triton
    or without the fields of `needs`; returns the unified diff of your edit."""
    path = Path(path)
    after = path.read_text()
    if after == before:
        raise NotYet(
            f"{step}: {path} is unchanged: open it in JupyterLab's editor (File, Open from "
            f"Path) or nano, {what}, save it, then run this cell again."
        )
    config = _schema(after, step, "the file", "the file before your edit (the diff)")
    _config_needs(config, needs or {}, step, what, "the file")
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"{path.name} (before)",
            tofile=f"{path.name} (your edit)",
        )
    )


# ---------------------------------------------------------------- calls and functions


def _judge(check, value, hint: str) -> tuple[bool, str]:
    """(does check(value) hold, the hint to give if not)."""
    try:
        return bool(check(value)), hint
    except Wrong as exc:
        return False, str(exc)
    except Exception as exc:  # the student's value, shaped otherwise than the step expects
        return False, hint or f"reading it failed with {type(exc).__name__}: {exc}"


def result(
    value,
    step: str,
    what: str,
    check=lambda value: True,
    hint: str = "",
    noun: str = "the call",
    where: str = "the text above it names the method",
):
    """The result of a call you wrote (e.g. a tritonclient call): stops while blank or while
    check(value) is false (or raises); returns the value."""
    if blank(value):
        raise not_written(step, noun, what, where)
    ok, hint = _judge(check, value, hint)
    if not ok:
        shown = textwrap.shorten(repr(value), 120, placeholder=" …")
        raise NotYet(f"{step}: {what}: your answer is {shown}; {hint or 'see the text above'}.")
    return value


def _body_is_blank(fn) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    # the def itself: a script runner's cell source can put other statements first
    defs = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name == getattr(fn, "__name__", None)
    ]
    if not defs:
        return False
    body = defs[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            body = body[1:]  # the docstring
    return (
        len(body) == 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and body[0].value.value is Ellipsis
    )


def function(
    fn,
    step: str,
    what: str,
    args: tuple = (),
    check=lambda returned: True,
    hint: str = "",
    where: str = "its docstring says what it returns",
):
    """A function whose body you wrote: stops while the body is `...`, when calling it with
    `args` raises, or while check(what it returned) is false; returns what it returned."""
    name = getattr(fn, "__name__", "the function")
    if blank(fn) or _body_is_blank(fn):
        raise not_written(step, f"the body of {name}()", what, where)
    try:
        returned = fn(*args)
    except Exception as exc:
        raise NotYet(
            f"{step}: {name}() stopped with {type(exc).__name__}: {exc} (fix it in the cell above)."
        ) from None
    ok, hint = _judge(check, returned, hint)
    if not ok:
        shown = textwrap.shorten(repr(returned), 120, placeholder=" …")
        raise NotYet(f"{step}: {what}: {name}() returned {shown}; {hint or where}.")
    return returned


# ---------------------------------------------------------------- Ray Serve deployment options


def deployment_options(
    answer,
    step: str,
    what: str,
    base,
    needs: dict[str, object],
    where: str = "the text above it names each option",
):
    """Your options of the Ray Serve deployment `base` (base.options(...) or a dict of options;
    an autoscaling_config as a dict or Ray's AutoscalingConfig), read by Ray itself
    (servelab.serve_options); stops unless each option of `needs` ({option, or
    "autoscaling_config.<field>": value}) has that value, and while another option differs from
    base's. Returns the Deployment, ready for .bind()."""
    if blank(answer):
        raise not_written(step, f"{base.name}.options(...)", what, where)
    try:
        deployment = serve_options.deployment_of(answer, base)
        full = serve_options.effective(deployment, base)
        changed = serve_options.changed(deployment, base)
    except serve_options.NotOptions as exc:
        raise NotYet(f"{step}: {exc}.") from None
    for key, want in needs.items():
        if key not in full or not serve_options.same(full[key], want):
            has = f"`{key}={full[key]!r}`" if key in full else f"no `{key.split('.')[0]}`"
            raise NotYet(f"{step}: {what}: your options give {has}, the step needs `{key}={want}`.")
    autoscaled = any(k.startswith("autoscaling_config") for k in needs)
    for key in changed:
        if key in needs or (autoscaled and key in ("num_replicas", "autoscaling_config")):
            continue  # an autoscaling deployment's num_replicas is the autoscaler's
        field = key.split(".")[-1]
        why = serve_options.CHANGES.get(field, "it changes how the deployment runs")
        raise NotYet(f"{step}: {what}: leave `{field}` out of your options: {why}.")
    return deployment
