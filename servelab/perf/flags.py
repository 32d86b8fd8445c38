"""perf_analyzer's flags read as perf_analyzer reads them, and what each of them changes.

Introduced in notebook 6: servelab.perf.Line reads your line with it, once; the checker
(exercises.perf_line), the runner and the verdicts then share that reading.

perf_analyzer (2.51, the lab's) reads its flags with C's getopt_long, so one flag has several
spellings, and this module accepts exactly those:

    -b 16, -b16                         a short flag's value: the next word, or the rest of the word
    --concurrency-range 8, ...=8        a long flag's value: the next word, or after `=`
    --concurrency 8                     any start of a long name that fits only one flag
    -va                                 short switches together (-v, then -a)

and nothing else: `-b=16` is `-b` with the value `=16` (perf_analyzer stops on it), and
`--batch-size` is no flag of perf_analyzer at all (its batch size is `-b`). Numbers are compared
as numbers (185.0 is 185), a range part by part (8 is 8:8 is 8:8:1).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# short flags (getopt's "vdazc:u:m:x:b:t:p:i:H:l:r:s:f:"): True where the flag takes a value
_SHORT = {c: False for c in "vdaz"} | {c: True for c in "cumxbtpiHlrsf"}
# the short flags that are another spelling of a long one: named by the long name here
_SHORT_IS_LONG = {
    "-a": "--async",
    "-p": "--measurement-interval",
    "-l": "--latency-threshold",
    "-s": "--stability-percentage",
    "-r": "--max-trials",
}
# the long flags without a value; every other long flag below takes one
_LONG_SWITCHES = {
    "async",
    "sync",
    "streaming",
    "binary-search",
    "serial-sequences",
    "verbose-csv",
    "collect-metrics",
    "enable-mpi",
    "ssl-grpc-use-ssl",
    "version",
}
_LONG = _LONG_SWITCHES | {
    *"max-threads sequence-length percentile data-directory shape measurement-interval".split(),
    *"concurrency-range latency-threshold stability-percentage max-trials input-data".split(),
    *"string-length string-data request-rate-range num-of-sequences request-distribution".split(),
    *"request-intervals shared-memory output-shared-memory-size service-kind".split(),
    *"model-signature-name grpc-compression-algorithm measurement-mode".split(),
    *"measurement-request-count triton-server-directory model-repository".split(),
    *"sequence-id-range ssl-grpc-root-certifications-file ssl-grpc-private-key-file".split(),
    *"ssl-grpc-certificate-chain-file ssl-https-verify-peer ssl-https-verify-host".split(),
    *"ssl-https-ca-certificates-file ssl-https-client-certificate-file".split(),
    *"ssl-https-client-certificate-type ssl-https-private-key-file".split(),
    *"ssl-https-private-key-type trace-level trace-rate trace-count log-frequency".split(),
    *"metrics-url metrics-interval sequence-length-variation bls-composing-models".split(),
    *"input-tensor-format output-tensor-format profile-export-file".split(),
    *"periodic-concurrency-range request-period request-parameter endpoint".split(),
    *"request-count warmup-request-count".split(),
}
# names other tools use that perf_analyzer does not have: its spelling of each
_NOT_ITS_NAME = {
    "--batch-size": "-b",
    "--url": "-u",
    "--protocol": "-i",
    "--model": "-m",
    "--model-name": "-m",
    "--model-version": "-x",
    "--header": "-H",
    "--verbose": "-v",
}
RANGES = {"--concurrency-range", "--request-rate-range"}


@dataclass
class Flags:
    """A perf_analyzer line's flags: {flag: value} (None for a switch; a flag written twice keeps
    its last value, as perf_analyzer does), each flag by one name (-b, --async for -a, ...)."""

    flags: dict[str, str | None] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)  # flag -> as the line wrote it
    problems: list[str] = field(default_factory=list)  # what perf_analyzer would refuse or skip
    # where each flag stands: (flag, its first word, the word after its last), every time it is
    # written; short switches written together (-va) share their word
    places: list[tuple[str, int, int]] = field(default_factory=list)

    def shown(self, flag: str) -> str:
        """The flag as the line wrote it, with its value: `-b16`, `--async`."""
        written, value = self.written.get(flag, flag), self.flags.get(flag)
        if value is None or written.endswith(value):
            return written
        return f"{written} {value}"


def canonical(flag: str) -> str:
    """The one name this module gives a flag: -a is --async, --conc is --concurrency-range."""
    if flag.startswith("--"):
        return _long_name(flag[2:])[0] or flag
    return _SHORT_IS_LONG.get(flag, flag)


def _long_name(name: str) -> tuple[str | None, str]:
    """(the long flag `--name` means, or None; why not), as getopt_long resolves a start."""
    if name in _LONG:
        return f"--{name}", ""
    if f"--{name}" in _NOT_ITS_NAME:
        return None, f"perf_analyzer has no `--{name}`: its flag is `{_NOT_ITS_NAME['--' + name]}`"
    fits = sorted(n for n in _LONG if n.startswith(name))
    if len(fits) == 1:
        return f"--{fits[0]}", ""
    if fits:
        names = ", ".join(f"--{n}" for n in fits[:4]) + (", ..." if len(fits) > 4 else "")
        return None, f"`--{name}` starts several flags ({names}): write the one you mean in full"
    return None, f"perf_analyzer has no flag `--{name}`"


def parse(words: list[str]) -> Flags:
    """The flags of a perf_analyzer line (its words after `perf_analyzer`), as getopt_long reads
    them; what it would refuse, or ignore (a word that follows no flag), goes to `problems`."""
    line, i = Flags(), 0
    while i < len(words):
        word, i = words[i], i + 1
        if word == "--":  # getopt: no flags after it
            line.problems += [
                f"`{w}` follows `--`, after which perf_analyzer reads no flag" for w in words[i:]
            ]
            break
        if not word.startswith("-") or word == "-":
            line.problems.append(f"`{word}` follows no flag: perf_analyzer would ignore it")
            continue
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            flag, why = _long_name(name)
            if flag is None:
                line.problems.append(why)
                continue
            takes, start = flag[2:] not in _LONG_SWITCHES, i - 1
            if takes and not eq:
                value, i = _next(line, words, i, word)
            elif eq and not takes:
                line.problems.append(f"`{flag}` takes no value, yours says `{word}`")
            _keep(line, flag, value if takes else None, word.partition("=")[0], (start, i))
            continue
        i = _short(line, word, words, i)
    return line


def _next(line: Flags, words: list[str], i: int, written: str) -> tuple[str | None, int]:
    """The word after a flag: its value, whatever it is (getopt takes even a flag)."""
    if i == len(words):
        line.problems.append(f"`{written}` needs a value after it")
        return None, i
    if words[i].startswith("-") and not _number(words[i]):
        line.problems.append(
            f"`{written}` takes the next word, `{words[i]}`, as its value: write its value after it"
        )
    return words[i], i + 1


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def _short(line: Flags, word: str, words: list[str], i: int) -> int:
    """One word of short flags (-v, -va, -b16, -b 16); returns the index of the next word."""
    start = i - 1
    for at, letter in enumerate(word[1:], start=1):
        if letter not in _SHORT:
            line.problems.append(f"perf_analyzer has no flag `-{letter}`")
            return i
        flag = _SHORT_IS_LONG.get(f"-{letter}", f"-{letter}")
        if not _SHORT[letter]:
            _keep(line, flag, None, f"-{letter}", (start, start + 1))
            continue
        value = word[at + 1 :]
        if value.startswith("="):
            line.problems.append(
                f"perf_analyzer reads `{word}` as `-{letter}` with the value `{value}`: "
                f"write `-{letter} {value[1:]}`"
            )
        if not value:
            value, i = _next(line, words, i, f"-{letter}")
        written = word if value and word.endswith(value) else f"-{letter}"
        _keep(line, flag, value, written, (start, i))
        return i
    return i


def _keep(line: Flags, flag: str, value: str | None, written: str, place: tuple) -> None:
    line.flags[flag] = value
    line.written[flag] = written
    line.places.append((flag, *place))


# flags whose value perf_analyzer reads in any case (ParseProtocol lowers it: -i HTTP is -i http)
ANY_CASE = {"-i"}


def same(flag: str, got, want) -> bool:
    """Does a flag's value say what `want` says? Numbers as numbers, ranges part by part (a range
    of one number is start:start:1), the rest as text (in any case where perf_analyzer reads it
    so, ANY_CASE); spaces never count. want None: any."""
    if want is None:
        return True
    got, want = str(got or "").replace(" ", ""), str(want).replace(" ", "")
    if flag in ANY_CASE:
        got, want = got.lower(), want.lower()
    if flag in RANGES:
        got_parts, want_parts = _range(got), _range(want)
        return len(got_parts) == len(want_parts) and all(map(_same_word, got_parts, want_parts))
    return _same_word(got, want)


def _range(value: str) -> list[str]:
    parts = value.split(":")
    if len(parts) == 1:
        parts *= 2
    return parts + ["1"] * (3 - len(parts))


def _same_word(got: str, want: str) -> bool:
    try:
        return float(got) == float(want)
    except ValueError:
        return got == want


# ---------------------------------------------------------------- what a flag changes

# Flags that change how long or how verbosely perf_analyzer measures, never what it measures
# (the load, the requests, the server, the client): every step allows them. The windows' length
# and agreement (-p, -s, -r, --measurement-mode, --measurement-request-count), a fixed number of
# requests instead of windows (--request-count) or before them (--warmup-request-count), and what
# it prints (-v; --verbose-csv, which the lab adds anyway). Not --percentile: it leaves the mean
# latency out of the CSV the lab's rows are read from.
LENGTH_ONLY = {
    "--measurement-interval",
    "--measurement-mode",
    "--measurement-request-count",
    "--stability-percentage",
    "--max-trials",
    "--request-count",
    "--warmup-request-count",
    "-v",
    "--verbose-csv",
}
# perf_analyzer's defaults: writing one changes nothing, so a step that does not ask for the
# flag still takes it
DEFAULTS = {"-b": "1", "-i": "http", "--shared-memory": "none"}

_CARRIES = "it changes what each request carries"
CHANGES = {
    "-m": "it names the model measured",
    "-x": "it measures another version of the model",
    "-u": "it sends the requests to another address",
    "-i": "it sets the protocol (HTTP or gRPC), part of what each request costs",
    "-b": "it makes every request a batch of that many inputs",
    "--concurrency-range": "it sets a closed-loop load (requests in flight)",
    "--periodic-concurrency-range": "it sets a closed-loop load that grows as it runs",
    "--request-rate-range": "it sets an open-loop load (requests per second)",
    "--request-distribution": "it sets how a rate's requests are spaced",
    "--request-intervals": "it sets when each request leaves",
    "--async": "it changes how the client keeps its requests in flight",
    "--sync": "it changes how the client keeps its requests in flight",
    "--max-threads": "it changes how many client threads send the requests",
    "--input-data": _CARRIES,
    "--shape": "it sets the shape of the tensor each request carries",
    "--string-length": _CARRIES,
    "--string-data": _CARRIES,
    "-z": _CARRIES,
    "--data-directory": _CARRIES,
    "--input-tensor-format": _CARRIES,
    "--output-tensor-format": "it changes what each answer carries",
    "--shared-memory": "it moves the inputs out of the requests into shared memory",
    "--output-shared-memory-size": "it moves the outputs into shared memory",
    "-H": "it adds a header to every request",
    "--streaming": "it streams the requests over gRPC",
    "--grpc-compression-algorithm": "it compresses every request",
    "--percentile": "perf_analyzer then leaves the mean latency out of the CSV the lab reads",
    "--latency-threshold": "it searches for a load instead of measuring the step's",
    "--binary-search": "it searches for a load instead of measuring the step's",
    "-d": "it searches for a load instead of measuring the step's",
    "-t": "it sets the requests in flight (an old spelling of --concurrency-range)",
    "-c": "it sets the most requests in flight of a search",
    "-f": "the lab names the CSV file itself and says where it is",
}
UNKNOWN_CHANGE = "the step's text does not use it, and it can change what is measured"
