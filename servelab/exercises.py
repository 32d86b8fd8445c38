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

Every check has the same shape: your answer, the step, what the step needs in words, then what
exactly to look for. A config.pbtxt text is judged by Triton's own schema (the ModelConfig
protobuf that servelab.triton_config parses with), and its instance_group by where Triton puts
the instances; a perf_analyzer line is read as perf_analyzer reads it (servelab.perf_flags), and
a flag that changes what is measured is refused unless the step needs it. What a step needs
beyond an answer's form (a latency in milliseconds, one model's statistics, instances per GPU)
is judged by what the answer does: servelab.step_needs, whose checks are called here as
exercises.timed_request, exercises.on_every_gpu, ...
"""

from __future__ import annotations

import ast
import difflib
import inspect
import shlex
import textwrap
from pathlib import Path

from google.protobuf import text_format

from servelab import config_text, perf_flags, step_needs

# what a step needs beyond its answer's form (servelab/step_needs.py), called as exercises.<name>
from servelab.step_needs import (  # noqa: F401
    Instances,
    Wrong,
    on_every_gpu,
    on_first_gpu,
    timed_request,
)


class NotYet(Exception):
    """An exercise that is not written, or not right yet: one sentence, no traceback.

    IPython shows what _render_traceback_() returns in place of a traceback; the exception still
    stops "Run All" at this cell, as any error does.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def blank(answer) -> bool:
    """Still the `...` the student edition holds (or an empty text)?"""
    return answer is Ellipsis or (isinstance(answer, str) and answer.strip() in ("", "..."))


def _blank_sentence(step: str, noun: str, what: str, where: str) -> NotYet:
    return NotYet(f"{step}: replace the `...` in the cell above with {noun} ({what}); {where}.")


def _text(answer, step: str, noun: str, what: str, where: str) -> str:
    if blank(answer):
        raise _blank_sentence(step, noun, what, where)
    if not isinstance(answer, str):
        raise NotYet(
            f"{step}: your answer is a {type(answer).__name__}, not a text: put it in quotes "
            "(an f-string can use the notebook's variables, such as {HOST})."
        )
    return answer


# ---------------------------------------------------------------- perf_analyzer lines


def perf_line(
    line,
    step: str,
    what: str,
    needs: dict[str, object] | None = None,
    leave_out: dict[str, str] | None = None,
    allows: set[str] = frozenset(),
    where: str = "the text above it explains each flag",
) -> str:
    """Your perf_analyzer line, read as perf_analyzer reads it (servelab.perf_flags: `-b 16` is
    `-b16`, 185.0 is 185); stops unless it carries every flag of `needs` ({flag: value}, value
    None: the flag alone) and no other flag that changes what is measured: none of `leave_out`
    ({flag: why}), and beyond `needs` only the flags of `allows` and those that change how long or
    how verbosely perf_analyzer measures (perf_flags.LENGTH_ONLY)."""
    line = _text(line, step, "your perf_analyzer line, in quotes", what, where)
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise NotYet(
            f"{step}: your line does not split into words as a shell would ({exc}): "
            "check its quotes."
        ) from None
    if not words or Path(words[0]).name != "perf_analyzer":
        raise NotYet(
            f"{step}: a perf_analyzer line starts with `perf_analyzer`, "
            f"yours with `{words[0] if words else ''}`."
        )
    read = perf_flags.parse(words[1:])
    if read.problems:
        raise NotYet(f"{step}: {read.problems[0]}.")
    needs = {perf_flags.canonical(f): v for f, v in (needs or {}).items()}
    may_stay = {perf_flags.canonical(f) for f in allows} | perf_flags.LENGTH_ONLY
    for flag in read.flags:
        if flag not in needs:
            _extra(flag, read, leave_out or {}, may_stay, f"{step}: {what}")
    for flag, want in needs.items():
        shown = flag if want is None else f"{flag} {want}"
        if flag not in read.flags:
            raise NotYet(f"{step}: {what}: your line has no `{shown}`.")
        if not perf_flags.same(flag, read.flags[flag], want):
            raise NotYet(
                f"{step}: {what}: your line says `{read.shown(flag)}`, the step needs `{shown}`."
            )
    return line


def _extra(flag: str, read: perf_flags.Line, leave_out: dict, may_stay: set, said: str) -> None:
    """Stops on a flag the step does not need, unless it may stay or is perf_analyzer's default:
    a flag that changes what is measured would put a wrong row under a right step's name."""
    leave_out = {perf_flags.canonical(f): why for f, why in leave_out.items()}
    if flag not in leave_out:
        if flag in may_stay:
            return
        default = perf_flags.DEFAULTS.get(flag)
        if default is not None and perf_flags.same(flag, read.flags[flag], default):
            return  # the default, written out: nothing changes
    why = leave_out.get(flag) or perf_flags.CHANGES.get(flag, perf_flags.UNKNOWN_CHANGE)
    raise NotYet(f"{said}: leave `{read.shown(flag)}` out of your line: {why}.")


# ---------------------------------------------------------------- config.pbtxt text


def _field(message, path: str):
    """The value at a dotted path of a ModelConfig (the first element of a repeated message; a
    map's entry by its key, e.g. "parameters.precision.string_value"), or None where the config
    does not set it."""
    value, names = message, path.split(".")
    while names:
        name = names.pop(0)
        descriptor = value.DESCRIPTOR.fields_by_name.get(name)
        if descriptor is None:
            raise KeyError(f"{value.DESCRIPTOR.name} has no field {name}")
        # protobuf 6+ has is_repeated and drops label (the GPU machine's); 4.x has only label
        repeated = getattr(descriptor, "is_repeated", None)
        if repeated is None:
            repeated = descriptor.label == descriptor.LABEL_REPEATED
        entry = descriptor.message_type
        if entry is not None and entry.GetOptions().map_entry:  # parameters { key: ... }
            key, entries = names.pop(0), getattr(value, name)
            if key not in entries:
                return None
            value = entries[key]
        elif descriptor.message_type is not None and not repeated:
            if not value.HasField(name):
                return None
            value = getattr(value, name)
        elif repeated and descriptor.message_type is not None:
            items = getattr(value, name)
            if not items:
                return None
            value = items[0]
        else:
            got = getattr(value, name)
            if descriptor.enum_type is not None:
                names = descriptor.enum_type.values_by_number
                return [names[v].name for v in got] if repeated else names[got].name
            return list(got) if repeated else got
    return value


def _config_needs(config, needs: dict[str, object], step: str, what: str, whose: str) -> None:
    for path, want in needs.items():
        if isinstance(want, Instances):  # judged by where Triton puts them
            try:
                step_needs.check_instances(config, want)
            except Wrong as exc:
                raise NotYet(f"{step}: {what}: {whose} {exc}.") from None
            continue
        got = _field(config, path)
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
    text = _text(text, step, "your config.pbtxt fragment, in quotes", what, where)
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


# ---------------------------------------------------------------- curl lines


def curl_line(
    line,
    step: str,
    what: str,
    url: str,
    json_tool: bool = True,
    where: str = "the text above it says how",
) -> str:
    """Your curl line: stops unless it asks `url` (as this Jupyter reaches the service) and, with
    json_tool, pipes the answer through `python -m json.tool`."""
    line = _text(line, step, "your curl line, in quotes", what, where)
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError as exc:
        raise NotYet(f"{step}: your line does not split into words ({exc}): check its quotes.")
    commands, current = [], []
    for word in words:
        if word == "|":
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    if not commands[0] or commands[0][0] != "curl":
        raise NotYet(f"{step}: the line starts with `curl`, yours with `{commands[0][:1]}`.")
    asked = next((w for w in commands[0][1:] if "/" in w and not w.startswith("-")), None)
    if asked is None:
        raise NotYet(f"{step}: {what}: your curl line names no URL (it is {url}).")
    want_base, want_path = _split_url(url)
    got_base, got_path = _split_url(asked)
    if got_path.rstrip("/") != want_path.rstrip("/"):
        raise NotYet(
            f"{step}: {what}: your line asks for `{got_path}`, the step needs `{want_path}`."
        )
    if got_base != want_base:
        raise NotYet(
            f"{step}: your line asks `{got_base}`, but from this Jupyter the service is at "
            f"`{want_base}` (use the notebook's variable for it)."
        )
    if json_tool:
        tool = commands[1] if len(commands) > 1 else []
        if len(tool) < 3 or not tool[0].startswith("python") or tool[1:3] != ["-m", "json.tool"]:
            raise NotYet(
                f"{step}: pipe curl's answer through `| python -m json.tool`, which prints "
                "the JSON one field per line."
            )
    return line


def _split_url(url: str) -> tuple[str, str]:
    """('http://host:port', '/path') of a URL written with or without http://."""
    rest = url.split("://", 1)[-1]
    host, slash, path = rest.partition("/")
    return f"http://{host}", slash + path


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
        raise _blank_sentence(step, noun, what, where)
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
        raise _blank_sentence(step, f"the body of {name}()", what, where)
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
