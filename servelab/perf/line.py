"""A perf_analyzer line, read once into the value the checker, the runner and the verdicts share.

Introduced in notebook 6.

    line = perf.Line.read("perf_analyzer -m food_classifier -u triton_server:8000 -b16")
    line.value("--batch-size")   # None: no such flag; line.value("-b") is "16"
    line.value("-u")            # "triton_server:8000"
    c16 = line.with_load("--concurrency-range 16")   # the same line at another load

A Line is the text you wrote (it is a str: print it, put it in an f-string) with what
perf_analyzer reads in it: its words and its flags (servelab/perf/flags.py reads them, as
perf_analyzer's getopt_long does). Nothing reads the text again: the checker
(exercises.perf_line) returns this value, perf.run_line runs its words, the laws read its `-b`,
and with_load() builds the line at another load from its flags.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from servelab.perf import flags

# the flags that set what load a line offers (one of them replaces the others: with_load)
LOAD_FLAGS = ("--concurrency-range", "--request-rate-range", "--request-distribution")


class Line(str):
    """A perf_analyzer line as typed (the str) and as perf_analyzer reads it (words, flags)."""

    words: tuple[str, ...]
    read_flags: flags.Flags

    def __new__(cls, text: str, words: tuple[str, ...], read_flags: flags.Flags) -> Line:
        line = super().__new__(cls, text)
        line.words, line.read_flags = tuple(words), read_flags
        return line

    def __getnewargs__(self) -> tuple:
        # pickle (and copy) make a str subclass again with __new__(cls, *these): all three, or a
        # notebook's namespace saved between two device calls does not load (resume_state)
        return (str(self), self.words, self.read_flags)

    @classmethod
    def read(cls, text: str) -> Line:
        """The line read once; ValueError unless its words split as a shell splits them and start
        with perf_analyzer (what perf_analyzer itself would refuse is in `.problems`)."""
        if isinstance(text, Line):
            return text
        words = shlex.split(text)  # ValueError: an unclosed quote
        if not words or Path(words[0]).name != "perf_analyzer":
            raise ValueError(f"not a perf_analyzer command: {text!r}")
        return cls(text, tuple(words), flags.parse(list(words[1:])))

    @property
    def flags(self) -> dict[str, str | None]:
        """{flag: value}, each flag by its one name (servelab.perf.flags.canonical)."""
        return self.read_flags.flags

    @property
    def problems(self) -> list[str]:
        """What perf_analyzer would refuse or ignore in the line, a sentence each."""
        return self.read_flags.problems

    def value(self, flag: str) -> str | None:
        """The value of `flag`, however the line spells it (-b16, --concurrency=8); None if
        absent (or a switch)."""
        return self.flags.get(flags.canonical(flag))

    def has(self, flag: str) -> bool:
        return flags.canonical(flag) in self.flags

    def shown(self, flag: str) -> str:
        """The flag as the line wrote it, with its value: `-b16`, `--async`."""
        return self.read_flags.shown(flags.canonical(flag))

    def with_load(self, load: str) -> Line:
        """This line with another load: each flag of `load` (e.g. "--concurrency-range 16")
        takes the place of the same flag here, however it was written, and a load that sets a
        range or a distribution replaces this line's (a rate instead of a concurrency); every
        other word stays as you wrote it. The lab's own runs of a step reuse your checked line
        this way. Only `load` is read: this line's flags say where each of its words stands."""
        extra = shlex.split(load)
        added = flags.parse(extra)
        if added.problems:
            raise ValueError(f"{load!r}: {added.problems[0]}")
        gone = set(added.flags)
        if gone & set(LOAD_FLAGS):
            gone |= set(LOAD_FLAGS)
        words, places = _without(self.words, self.read_flags, gone)
        at = len(words) - 1  # the load's words follow (indices after perf_analyzer)
        kept = flags.Flags(
            flags={k: v for k, v in self.flags.items() if k not in gone} | added.flags,
            written={k: v for k, v in self.read_flags.written.items() if k not in gone}
            | added.written,
            places=places + [(f, a + at, b + at) for f, a, b in added.places],
        )
        full = (*words, *extra)
        return Line(" ".join(shlex.quote(w) for w in full), full, kept)


def _without(
    words: tuple[str, ...], read: flags.Flags, gone: set[str]
) -> tuple[tuple[str, ...], list[tuple[str, int, int]]]:
    """The line's words (perf_analyzer first) without the flags in `gone`, and where the others
    then stand. Short flags written together (-va, -vb16) lose only the letters that go."""
    starting: dict[int, list[tuple[str, int, int]]] = {}
    for place in read.places:
        starting.setdefault(place[1], []).append(place)
    kept_words, places, index, args = [words[0]], [], 0, words[1:]
    while index < len(args):
        here = starting.get(index)
        if not here:  # a word no flag reads (perf_analyzer ignores it): it stays
            kept_words.append(args[index])
            index += 1
            continue
        end = max(e for _, _, e in here)
        staying = [p for p in here if p[0] not in gone]
        at = len(kept_words) - 1
        if len(staying) == len(here):
            kept_words += args[index:end]
        elif staying:  # short flags written together: keep the letters of those that stay
            word = args[index]
            letters = [
                word[1 + j] + (word[2 + j :] if j == len(here) - 1 else "")
                for j, p in enumerate(here)
                if p in staying
            ]
            value_words = args[index + 1 : end] if here[-1] in staying else ()
            kept_words += ["-" + "".join(letters), *value_words]
        places += [(f, at, at + (e - s)) for f, s, e in staying]
        index = end
    return tuple(kept_words), places
