"""The command the lab runs for a perf_analyzer line you typed, and the line it shows back.

Introduced in notebook 6 (perf.run_line runs every line through it). It works on the line as
read once (servelab/perf/line.py): what it adds it knows, and nothing is read twice.

The lab runs your line as typed and adds only what it reads back: the CSV file (-f,
--verbose-csv), -v (each measurement window's numbers) and, when the line does not set them, the
measurement window length and stability of this run's settings (LAB_PERF_* in `make lab`).
Triton's shared-memory API needs the node's secret: a line with `--shared-memory system|cuda`
gets `-H lab-admin-key:$TRITON_ADMIN_KEY` (gRPC: the header `triton-grpc-protocol-lab-admin-key`)
unless it carries it, and `$TRITON_ADMIN_KEY` in a -H value is read from the environment as a
shell would; the key itself is never printed. The statistics and utilisation around a run come
from the Triton the line names (its -u, over HTTP), else the environment's.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from servelab import labenv
from servelab.perf import tool
from servelab.perf.line import Line

_HEADER_FLAGS = ("-H", "--header")
_ADMIN_NAMES = (labenv.ADMIN_HEADER, labenv.GRPC_ADMIN_HEADER)
_KEY_VARIABLES = ("${TRITON_ADMIN_KEY}", "$TRITON_ADMIN_KEY")


def model_line(line: str) -> Line:
    """The line read once; ValueError unless it is a perf_analyzer line that names its model."""
    line = Line.read(line)
    if line.value("-m") is None:
        raise ValueError("the command names no model (-m NAME)")
    return line


def triton_of(line: Line, url: str | None, metrics_url: str | None) -> tuple[str, str]:
    """The Triton a line measures, as (HTTP URL, metrics URL): those given, else the server of the
    line's -u over HTTP (its statistics and its utilisation alike), else the environment's."""
    if url is None and line.value("-u") and (line.value("-i") or "http").lower() == "http":
        url = line.value("-u")
    return labenv.triton_url(url), labenv.metrics_url(metrics_url, server=url)


def _admin_header(value: str) -> bool:
    return value.split(":", 1)[0].strip().lower() in _ADMIN_NAMES


def shell_line(cmd: list[str]) -> str:
    """The command as a line to retype (perf_analyzer by name when it is the one on PATH or in the
    venv), with the node's secret shown as $TRITON_ADMIN_KEY, never its value."""
    shown = list(cmd)
    if shown and Path(shown[0]).name == "perf_analyzer":
        shown[0] = "perf_analyzer"
    words = [shlex.quote(a) for a in shown]
    for i in range(1, len(shown)):
        if shown[i - 1] in _HEADER_FLAGS and _admin_header(shown[i]):
            # unquoted, so the line typed in a shell reads the variable
            words[i] = shown[i].split(":", 1)[0] + ":$TRITON_ADMIN_KEY"
    return " ".join(words)


def without_secret(cmd: list[str]) -> list[str]:
    """The command with the node's secret written as $TRITON_ADMIN_KEY (a notebook may show it)."""
    key = os.environ.get("TRITON_ADMIN_KEY")
    return [a.replace(key, "$TRITON_ADMIN_KEY") if key else a for a in cmd]


def _key_read(argv: list[str], key: str) -> list[str]:
    """argv with $TRITON_ADMIN_KEY in a -H value replaced by the key, as a shell would."""
    argv = list(argv)
    for i in range(1, len(argv)):
        if argv[i - 1] in _HEADER_FLAGS and any(v in argv[i] for v in _KEY_VARIABLES):
            if not key:
                raise ValueError(
                    "the line uses $TRITON_ADMIN_KEY but it is not set (the lab's Jupyter has it; "
                    "local mode: .lab/secrets.env, Docker: docker/.env)"
                )
            for variable in _KEY_VARIABLES:
                argv[i] = argv[i].replace(variable, key)
    return argv


def with_admin_header(line: Line) -> tuple[list[str], str]:
    """The line's words with the node's secret where Triton needs it, and a note saying what was
    added.

    Triton's shared-memory API (register/unregister, which perf_analyzer calls for
    --shared-memory system|cuda) answers only requests carrying labenv.ADMIN_HEADER (over gRPC:
    labenv.GRPC_ADMIN_HEADER). run_line does not go through a shell, so $TRITON_ADMIN_KEY in a -H
    value is read here."""
    key = os.environ.get("TRITON_ADMIN_KEY", "")
    argv = _key_read(list(line.words), key)
    shared = (line.value("--shared-memory") or "none").lower()
    has_header = any(
        argv[i - 1] in _HEADER_FLAGS and _admin_header(argv[i]) for i in range(1, len(argv))
    )
    if shared == "none" or has_header or not key:
        return argv, ""
    grpc = (line.value("-i") or "http").lower() == "grpc"
    name = labenv.GRPC_ADMIN_HEADER if grpc else labenv.ADMIN_HEADER
    return [*argv, "-H", f"{name}:{key}"], f"-H {name}:$TRITON_ADMIN_KEY"


def measurement_settings() -> dict[str, str]:
    """What the lab adds to a typed line when the line does not set it: the length of the
    measurement windows and how much they may disagree (make lab's quick runs shorten them)."""
    return {
        "--measurement-interval": os.environ.get("LAB_PERF_INTERVAL_MS", "5000"),
        "--stability-percentage": os.environ.get("LAB_PERF_STABILITY", "20"),
        "--max-trials": os.environ.get("LAB_PERF_MAX_TRIALS", "10"),
    }


def _settings(typed: dict) -> dict[str, str]:
    """The measurement settings the line leaves out, as this run will use them."""
    settings = {k: v for k, v in measurement_settings().items() if k not in typed}
    if "--request-count" in typed:
        settings.pop("--stability-percentage", None)  # the count decides the length
    elif "--request-rate-range" in typed:
        # a fixed rate decides the load: three windows, whatever their spread (an overloaded server
        # never settles, and that spread is the finding)
        settings.update({"--stability-percentage": "1000", "--max-trials": "3"})
    return settings


@dataclass(frozen=True)
class Command:
    """What runs for a line: the line as read, the words run (perf_analyzer's path, the line's
    words, the measurement settings added, -f/--verbose-csv/-v), and the notes saying what was
    added."""

    line: Line
    argv: list[str]
    settings: dict[str, str]  # the measurement settings the line left out, as added
    csv_path: Path
    notes: list[str]

    def value(self, flag: str) -> str | None:
        """A flag's value in what runs: the line's, else a setting the lab added."""
        return self.line.value(flag) or self.settings.get(flag)

    @property
    def shell(self) -> str:
        return shell_line(self.argv)

    def relaxed(self) -> Command | None:
        """The command again with the windows it added four times as long, accepting any spread
        between them (None when the line set both itself: nothing to relax)."""
        settings = dict(self.settings)
        if "--stability-percentage" in settings:
            settings["--stability-percentage"] = "1000"
        if "--measurement-interval" in settings:
            settings["--measurement-interval"] = str(4 * int(settings["--measurement-interval"]))
        if settings == self.settings:
            return None
        argv = list(self.argv)
        for flag, value in settings.items():
            argv[argv.index(flag) + 1] = value
        return Command(self.line, argv, settings, self.csv_path, self.notes)

    def timeout_s(self) -> float:
        """How long a run may take before it is stopped: from its windows, trials and levels."""
        if self.value("--request-count"):
            return 120 + float(self.value("--request-count"))
        interval_s = float(self.value("--measurement-interval") or 5000) / 1000
        trials = int(self.value("--max-trials") or 10)
        levels = 1
        load = self.value("--concurrency-range") or self.value("--request-rate-range") or "1"
        parts = load.split(":")
        if len(parts) >= 2:
            start, end = float(parts[0]), float(parts[1])
            step = float(parts[2]) if len(parts) > 2 else 1.0
            levels = max(1, int((end - start) / step) + 1)
        return levels * (interval_s * (trials + 1) + 15) + 30


def command(line: Line, csv_path: Path) -> Command:
    """What runs for `line`: its words, the measurement settings it leaves out, the plumbing
    the lab reads back, and the node's secret where Triton needs it (each said in a note)."""
    typed = line.flags  # the line's flags, whatever their spelling
    settings = _settings(typed)
    plumbing = ["-f", str(csv_path)] + [f for f in ("--verbose-csv", "-v") if f not in typed]
    argv, secret = with_admin_header(line)
    added = [x for kv in settings.items() for x in kv]
    notes = []
    if settings:
        shown = " ".join(f"{k} {v}" for k, v in settings.items())
        notes.append(f"(measurement settings of this run, added to the line: {shown})")
    if secret:
        notes.append(f"(Triton's shared-memory API needs the node's secret: added {secret})")
    argv = [tool.perf_analyzer_path(), *argv[1:], *added, *plumbing]
    return Command(line, argv, settings, csv_path, notes)
