"""Checks of the command lines you type in an exercise: a perf_analyzer line read once as
perf_analyzer reads it (servelab.perf.Line), a curl line split as the shell splits it; answered
in your terms.

Introduced in notebook 3 (curl); notebooks 6 and 7 check every perf_analyzer line with it, through
the table of steps (exercises.perf_line(line, "6.1b"), servelab/exercises/steps.py), which hands
each check what its step needs.

A line is compared with the step by what it measures, flag by flag: each flag's value as
perf_analyzer takes it, written out or left to perf_analyzer's default (no `-b` is `-b 1`, no
`--concurrency-range` in a closed loop is one request in flight). A line that differs is answered
with what it measures, in the lesson's words, and where to look; never with the step's value.
"""

from __future__ import annotations

import re
import shlex

from servelab.exercises import key
from servelab.exercises.answers import NotYet, section, written_text
from servelab.exercises.key import Needs, Plain, number
from servelab.passes import record
from servelab.perf import flags
from servelab.perf.line import Line

# the flags a step may ask for: each one the checks know what it changes
VOCABULARY = tuple(sorted(set(flags.CHANGES) | flags.LENGTH_ONLY | set(flags.DEFAULTS)))
# perf_analyzer's defaults: a flag left out takes them (a closed loop's one request in flight,
# below, only where the line sets no other load)
DEFAULTS = {**flags.DEFAULTS, "--input-data": "random", "--request-distribution": "constant"}
OTHER_LOADS = ("--request-rate-range", "--request-intervals", "--periodic-concurrency-range")
ON, OFF = "on", "off"  # a switch (--async) written, or not
SWITCHES = ("--async",)

# what a line does with a flag, in the lesson's words (its value as you wrote it)
SAID = {
    "-m": lambda v: f"measures the model `{v}`",
    "-u": lambda v: f"sends its requests to `{v}`",
    "-i": lambda v: f"speaks {dict(http='HTTP', grpc='gRPC').get(v.lower(), v)}",
    "--concurrency-range": lambda v: (
        f"keeps {v} request{'' if number(v) == '1' else 's'} in flight"
    ),
    "--request-rate-range": lambda v: f"offers {v} requests/s",
    "--request-distribution": lambda v: {
        "constant": "spaces its requests evenly",
        "poisson": "sends its requests at random moments",
    }.get(v, f"spaces its requests as `{v}`"),
    "--async": lambda v: (
        "sends each request without waiting for the earlier ones' answers"
        if v == ON
        else "waits for each answer before it sends the next request"
    ),
    "-b": lambda v: (
        "sends one image per request" if number(v) == "1" else f"makes every request {v} images"
    ),
    "--shape": lambda v: f"gives the input the shape `{v}`",
    "--input-data": lambda v: (
        "sends perf_analyzer's random input" if v == "random" else f"sends `{v}` as its input"
    ),
    "--request-count": lambda v: f"stops after {v} requests",
    "--shared-memory": lambda v: (
        "carries its inputs in every request" if v == "none" else f"puts its inputs in {v} memory"
    ),
}
# ... and a line without the flag where perf_analyzer has no default
MISSING = {
    "-m": "names no model, where the step measures one",
    "-u": "names no server address, where the step sends to one",
    "--request-rate-range": "offers no rate (it keeps requests in flight), where the step does",
    "--shape": "gives the input no shape, where the step gives one",
    "--request-count": "measures in windows of time, where the step sends a count of requests",
}
# what the step sets with the flag, never its value
ASKS = {
    "-m": "the model the step measures",
    "-u": "the address the step sends to",
    "-i": "the protocol the step measures",
    "--concurrency-range": "the load the step asks for",
    "--request-rate-range": "the rate the step offers",
    "--request-distribution": "the spacing the step asks for",
    "--async": "the way the step keeps its requests in flight",
    "-b": "the batch the step sends",
    "--shape": "the shape the step's input takes",
    "--input-data": "the input the step sends",
    "--request-count": "the count of requests the step asks for",
    "--shared-memory": "where the step puts its inputs",
}


def effective(line: Line, flag: str) -> str | None:
    """The value perf_analyzer takes for `flag` on this line: as written, else its default (ON or
    OFF for a switch); None where it has none."""
    if flag in line.flags:
        return ON if flag in SWITCHES else line.flags[flag]
    if flag in SWITCHES:
        return OFF
    if flag == "--concurrency-range":
        return None if any(f in line.flags for f in OTHER_LOADS) else "1"
    return DEFAULTS.get(flag)


def canonical(flag: str, value, n_gpus: int = 0) -> tuple:
    """A flag's value in one spelling: numbers as numbers, a range part by part (8 is 8:8:1), in
    any case where perf_analyzer reads it so, without spaces; a need of None is a switch, ON."""
    if value is None:
        return (ON,)
    text = str(value).replace(" ", "")
    if flag in flags.ANY_CASE:
        text = text.lower()
    if flag in flags.RANGES:
        parts = text.split(":")
        parts = (parts * 2 if len(parts) == 1 else parts) + ["1"] * (3 - max(len(parts), 2))
        return tuple(number(p) for p in parts)
    return (number(text),)


def _needs(step: str, needs, values) -> Needs:
    if isinstance(needs, Needs):
        return needs
    return Plain(step, {flags.canonical(f): v for f, v in (needs or {}).items()}, values)


def perf_line(
    line,
    step: str,
    what: str,
    needs: Needs | dict,
    leave_out: dict[str, str] | None = None,
    allows: set[str] = frozenset(),
    where: str = "the text above it explains each flag",
    record: bool = True,
    values: dict | None = None,
) -> Line:
    """Your perf_analyzer line, read once as perf_analyzer reads it (servelab.perf.Line: `-b 3`
    is `-b3`, 185.0 is 185, `-i HTTP` is `-i http`); stops unless each flag the step sets
    (`needs`: a key.Needs, or {flag: value}, value None: the flag alone) takes the step's value,
    written or by default, and no other flag changes what is measured: none of `leave_out`
    ({flag: why}), and beyond the step's only the flags of `allows`, those that change how long
    or how verbosely perf_analyzer measures (perf.flags.LENGTH_ONLY), and defaults written out.
    `values`: the notebook's (exercises.given). Returns the line as read (a perf.Line, a str
    too), which perf.run_line runs without reading it again."""
    needs = _needs(step, needs, values)
    line = _read(written_text(line, step, "your perf_analyzer line, in quotes", what, where), step)
    asked = needs.fields(VOCABULARY)
    if len(asked) != needs.count:
        raise KeyError(f"{step}: a flag it needs is not among the flags the checks know")
    may_stay = {flags.canonical(f) for f in allows} | flags.LENGTH_ONLY
    for flag in line.flags:
        if flag not in asked:
            _extra(flag, line, leave_out or {}, may_stay, step)
    for flag in asked:
        got = effective(line, flag)
        if got is None or not needs.meets(flag, canonical(flag, got), canonical):
            raise NotYet(_differs(step, flag, line, got))
    if record:
        _kept(step, what, line)
    return line


def _differs(step: str, flag: str, line: Line, got: str | None) -> str:
    """The sentence for a flag whose value is not the step's: what the line does with it, what
    the step sets with it, and where to look; never the step's value."""
    look = f"{section(step)} says which, and `perf_analyzer --help` how to write it"
    asks = ASKS.get(flag, "what the step sets with it")
    if got is None:
        said = MISSING.get(flag, f"has no `{flag}`, where the step sets one")
        return f"{step}: your line {said}: {look}."
    shown = SAID[flag](got) if flag in SAID else f"has `{line.shown(flag)}`"
    default = "" if flag in line.flags else " (perf_analyzer's default)"
    return f"{step}: your line {shown}{default}, not {asks}: {look}."


def _kept(step: str, what: str, text: str) -> None:
    record.line(step, what, text)


def _read(text: str, step: str) -> Line:
    """The line read once (perf.Line), as perf_analyzer reads it; NotYet if it is none."""
    try:
        line = Line.read(text)
    except ValueError as exc:
        words = text.split()
        if "not a perf_analyzer command" in str(exc):
            raise NotYet(
                f"{step}: a perf_analyzer line starts with `perf_analyzer`, "
                f"yours with `{words[0] if words else ''}`."
            ) from None
        raise NotYet(
            f"{step}: your line does not split into words as a shell would ({exc}): "
            "check its quotes."
        ) from None
    if line.problems:
        raise NotYet(f"{step}: {line.problems[0]}.")
    return line


def _extra(flag: str, line: Line, leave_out: dict, may_stay: set, step: str) -> None:
    """Stops on a flag the step does not set, unless it may stay or is perf_analyzer's default
    written out: a flag that changes what is measured would put a wrong row under a right step's
    name."""
    leave_out = {flags.canonical(f): why for f, why in leave_out.items()}
    if flag not in leave_out:
        if flag in may_stay or (flag == "--sync" and "--async" not in line.flags):
            return
        default = DEFAULTS.get(flag)
        if default is not None and canonical(flag, line.flags[flag]) == canonical(flag, default):
            return  # the default, written out: nothing changes
    why = leave_out.get(flag) or flags.CHANGES.get(flag, flags.UNKNOWN_CHANGE)
    raise NotYet(f"{step}: leave `{line.shown(flag)}` out of your line: {why}.")


def curl_line(
    line,
    step: str,
    what: str,
    needs: Needs | str,
    json_tool: bool = True,
    where: str = "the text above it says how",
    values: dict | None = None,
) -> str:
    """Your curl line: stops unless it asks the step's URL (`needs`: a key.Needs whose field
    "url" is it, or the URL itself) at an address the notebook gives (`values`), with GET, and
    with json_tool, pipes the answer through `python -m json.tool`. The URL is the word no option
    takes as its value (`-H 'Accept: ...'` is a header), or the one after --url."""
    if not isinstance(needs, Needs):
        needs = Plain(step, {"url": needs}, values)
    line = written_text(line, step, "your curl line, in quotes", what, where)
    commands = _pipeline(line, step)
    if not commands[0] or commands[0][0] != "curl":
        raise NotYet(f"{step}: the line starts with `curl`, yours with `{commands[0][:1]}`.")
    _asks_for(_curl_url(commands[0][1:]), needs, step)
    _asks_with_get(commands[0][1:], step, what)
    if json_tool:
        tool = commands[1] if len(commands) > 1 else []
        if len(tool) < 3 or not tool[0].startswith("python") or tool[1:3] != ["-m", "json.tool"]:
            raise NotYet(
                f"{step}: pipe curl's answer through `| python -m json.tool`, which prints "
                "the JSON one field per line."
            )
    _kept(step, what, line)
    return line


# curl's options that take the next word as their value (curl 8's, those a student may write):
# the word after one of them is never the URL. A short one may end a word of switches (-sH).
_CURL_SHORT_VALUES = set("AbcdeEFHKmorTuwxXyYz")
_CURL_LONG_VALUES = {
    *"--user-agent --cookie --cookie-jar --data --data-raw --data-binary --data-urlencode".split(),
    *"--referer --cert --form --header --config --max-time --output --range --upload-file".split(),
    *"--user --write-out --proxy --request --connect-timeout --retry --json --resolve".split(),
}


def url_words(field: str, url, n_gpus: int = 0) -> tuple:
    """A URL as (the server's address, the path): "http://host:port" and "/v2/...", written with
    or without http://, a trailing / or not; a need's "{TRITON}/v2/..." as ("{TRITON}", ...)."""
    named = re.fullmatch(r"(\{\w+\})(.*)", str(url))
    base, path = (named[1], named[2]) if named else _split_url(str(url))
    return base.rstrip("/"), path.rstrip("/") or "/"


def _asks_for(asked: str | None, needs: Needs, step: str) -> None:
    """The URL a curl line asks is the step's, at an address this Jupyter reaches it by."""
    if asked is None:
        raise NotYet(f"{step}: your curl line names no URL.")
    base, path = url_words("url", asked)
    if needs.meets("url", (base, path), url_words):
        return
    services = [n for n, v in needs.values.items() if str(v).startswith("http")]
    if not any(key.word(needs.values[n]) == base for n in services):
        named = " or ".join(f"`{n}`" for n in services) or "the notebook's variable for it"
        raise NotYet(
            f"{step}: your line asks `{base}`, which is not where this Jupyter reaches the "
            f"service: write the address as the notebook holds it ({named})."
        )
    raise NotYet(
        f"{step}: your line asks for `{path}`, not what the step reads: {section(step)} gives "
        "the path's form."
    )


def _asks_with_get(words: list[str], step: str, what: str) -> None:
    """A reading is a GET: no other method, and no body (curl POSTs one)."""
    for at, word in enumerate(words):
        method = words[at + 1] if word in ("-X", "--request") and at + 1 < len(words) else None
        if word.startswith("-X") and len(word) > 2:
            method = word[2:]
        if method and method.upper() != "GET":
            raise NotYet(f"{step}: {what}: it is read with GET; leave `{word} {method}` out.")
        if word in ("-d", "--data", "--data-raw", "--data-binary", "--json", "-F", "--form"):
            raise NotYet(
                f"{step}: {what}: `{word}` makes curl send a body with POST; leave it out."
            )


def _takes_next(word: str) -> bool:
    """Does this curl word take the next word as its value?"""
    if word.startswith("--"):
        return word in _CURL_LONG_VALUES
    letters = word[1:] if word.startswith("-") else ""
    for at, letter in enumerate(letters):
        if letter in _CURL_SHORT_VALUES:
            return at == len(letters) - 1  # -HAccept:... carries its value in the word
    return False


def _curl_url(words: list[str]) -> str | None:
    """The URL among curl's words: after --url, else the first word that is no option and no
    option's value."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--url" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--url="):
            return word.split("=", 1)[1]
        if not word.startswith("-"):
            return word
        i += 2 if _takes_next(word) else 1
    return None


def _pipeline(line: str, step: str) -> list[list[str]]:
    """The commands of a shell line (the words between its pipes), split as the shell splits."""
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
    return [*commands, current]


def _split_url(url: str) -> tuple[str, str]:
    """('http://host:port', '/path') of a URL written with or without http://."""
    rest = url.split("://", 1)[-1]
    host, slash, path = rest.partition("/")
    return f"http://{host}", slash + path
