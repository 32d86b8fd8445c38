"""Checks of the command lines you type in an exercise: a perf_analyzer line read once as
perf_analyzer reads it (servelab.perf.Line), a curl line split as the shell splits it; answered
in your terms.

Introduced in notebook 3 (curl); notebooks 6 and 7 check every perf_analyzer line with it. The
notebooks call these as exercises.perf_line(line, "6.1b") and exercises.curl_line(line, "3.1"):
what each step needs is in servelab/exercises/steps.py.
"""

from __future__ import annotations

import shlex

from servelab.exercises import steps
from servelab.exercises.answers import NotYet, written_text
from servelab.passes import record
from servelab.perf import flags
from servelab.perf.line import Line


def perf_line(
    line,
    step: str,
    what: str | None = None,
    needs: dict[str, object] | None = None,
    leave_out: dict[str, str] | None = None,
    allows: set[str] = frozenset(),
    where: str = "the text above it explains each flag",
    record: bool = True,
) -> Line:
    """Your perf_analyzer line, read once as perf_analyzer reads it (servelab.perf.Line: `-b 16`
    is `-b16`, 185.0 is 185, `-i HTTP` is `-i http`); stops unless it carries every flag of
    `needs` ({flag: value}, value None: the flag alone) and no other flag that changes what is
    measured: none of `leave_out` ({flag: why}), and beyond `needs` only the flags of `allows` and
    those that change how long or how verbosely perf_analyzer measures (perf.flags.LENGTH_ONLY).
    Without `what`, the step's own (steps.STEPS). Returns the line as read (a perf.Line, a str
    too), which perf.run_line runs without reading it again."""
    if what is None:
        known = steps.step(step, steps.Perf)
        (what, needs), leave_out = known.resolved(), known.leave_out
    line = _read(written_text(line, step, "your perf_analyzer line, in quotes", what, where), step)
    needs = {flags.canonical(f): v for f, v in (needs or {}).items()}
    may_stay = {flags.canonical(f) for f in allows} | flags.LENGTH_ONLY
    for flag in line.flags:
        if flag not in needs:
            _extra(flag, line, leave_out or {}, may_stay, f"{step}: {what}")
    for flag, want in needs.items():
        shown = flag if want is None else f"{flag} {want}"
        if flag not in line.flags:
            raise NotYet(f"{step}: {what}: your line has no `{shown}`.")
        if not flags.same(flag, line.flags[flag], want):
            raise NotYet(
                f"{step}: {what}: your line says `{line.shown(flag)}`, the step needs `{shown}`."
            )
    if record:
        _kept(step, what, line)
    return line


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


def _extra(flag: str, line: Line, leave_out: dict, may_stay: set, said: str) -> None:
    """Stops on a flag the step does not need, unless it may stay or is perf_analyzer's default:
    a flag that changes what is measured would put a wrong row under a right step's name."""
    leave_out = {flags.canonical(f): why for f, why in leave_out.items()}
    if flag not in leave_out:
        if flag in may_stay:
            return
        default = flags.DEFAULTS.get(flag)
        if default is not None and flags.same(flag, line.flags[flag], default):
            return  # the default, written out: nothing changes
    why = leave_out.get(flag) or flags.CHANGES.get(flag, flags.UNKNOWN_CHANGE)
    raise NotYet(f"{said}: leave `{line.shown(flag)}` out of your line: {why}.")


def curl_line(
    line,
    step: str,
    what: str | None = None,
    url: str | None = None,
    json_tool: bool = True,
    where: str = "the text above it says how",
) -> str:
    """Your curl line: stops unless it asks `url` (as this Jupyter reaches the service) and, with
    json_tool, pipes the answer through `python -m json.tool`. Without `what`, the step's own
    (steps.STEPS). The URL is the word no option takes as its value (`-H 'Accept: ...'` is a
    header), or the one after --url."""
    if what is None:
        known = steps.step(step, steps.Curl)
        what, url = known.what, steps.filled(known.url)
    line = written_text(line, step, "your curl line, in quotes", what, where)
    commands = _pipeline(line, step)
    if not commands[0] or commands[0][0] != "curl":
        raise NotYet(f"{step}: the line starts with `curl`, yours with `{commands[0][:1]}`.")
    _asks_for(_curl_url(commands[0][1:]), url, step, what)
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


def _asks_for(asked: str | None, url: str, step: str, what: str) -> None:
    """The URL a curl line asks is the step's, at the address this Jupyter reaches it by."""
    if asked is None:
        raise NotYet(f"{step}: {what}: your curl line names no URL.")
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
