"""perf_analyzer runs for the Triton notebooks: the command you type, its own output, a parsed row.

Introduced in notebook 6.

    from servelab import perf
    run = perf.run_line(f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8", "a c8")
    run.row          # one parsed row (times in ms), with Triton's batch counts and utilisation
    run.throughput   # inferences/s with the interval of perf_analyzer's windows (claims.Measured)

run_line() runs the line as typed, adding only what the lab reads back, and says what it added
(servelab/perf_command.py); it reads perf_analyzer's output with servelab/perf_output.py, and
Triton's statistics and utilisation around the run with servelab/triton_stats.py. Each row
carries the two laws (servelab/queueing.py's laws()). Where perf_analyzer is found and the
environment it starts with: servelab/tools.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from servelab import (
    instances,
    perf_command,
    perf_flags,
    perf_output,
    queueing,
    tools,
    triton_config,
    triton_stats,
)
from servelab.paths import RESULTS
from servelab.serving.triton_procs import hide_argument


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer failed; the message carries the command and the end of its output."""


# the flags that set what load a line offers (one of them replaces the others: with_load)
_LOAD_FLAGS = ["--concurrency-range", "--request-rate-range", "--request-distribution"]


def with_load(line: str, load: str) -> str:
    """Your line with another load: each flag of `load` (e.g. "--concurrency-range 16") takes the
    place of the same flag in `line`, written `--flag value`, `--flag=value` or `-b16`, and a load
    that sets a range or a distribution replaces the line's (a rate instead of a concurrency);
    every other word stays as you wrote it. The lab's own runs of a step reuse your checked line
    this way."""
    words, extra = shlex.split(line), shlex.split(load)
    names = [w for w in extra if w.startswith("-")]
    if set(names) & set(_LOAD_FLAGS):
        names += _LOAD_FLAGS
    kept, i = [], 0
    while i < len(words):
        word = words[i]
        name = next((n for n in names if word == n or word.startswith((f"{n}=", n))), None)
        if name is None:
            kept.append(word)
        elif word == name and i + 1 < len(words) and not words[i + 1].startswith("-"):
            i += 1  # its value goes too
        i += 1
    return " ".join(shlex.quote(w) for w in kept + extra)


@dataclass
class PerfResult:
    command: list[str]
    shell: str
    output: str
    returncode: int
    seconds: float
    table: object = None  # pandas DataFrame, one row per load level
    extra: dict = field(default_factory=dict)  # columns run_line() adds to row
    stats: dict = field(default_factory=dict)  # triton_stats.stats_delta() of the run
    utilisation: list = field(default_factory=list)  # samples over time: {t_s, gpu0_util_pct, ..}

    @property
    def row(self) -> dict:
        """The (last) load level as a dict, with what run_line() added."""
        return {**self.table.iloc[-1].to_dict(), **self.extra}

    @property
    def windows(self) -> list[dict]:
        return perf_output.parse_windows(self.output)

    @property
    def throughput(self):
        """Inferences per second, with the lowest and highest of the windows perf_analyzer judged
        (its last three: the first ones of a run may still be warming up) as its interval."""
        from servelab.claims import Measured

        values = [w["throughput_infer_s"] for w in self.windows][-3:]
        reported = self.row["throughput_infer_s"]
        return Measured.from_windows(values, reported) if values else Measured.exact(reported)

    def measured(self, column: str):
        """Any other column of the row, with the relative spread of the throughput windows."""
        from servelab.claims import Measured

        return Measured.exact(self.row[column]).with_spread_of(self.throughput)


def _execute(cmd: list[str], limit: float, line: str) -> tuple[int, str]:
    """(exit code, stdout + stderr) of perf_analyzer, stopped after `limit` seconds."""
    key = os.environ.get("TRITON_ADMIN_KEY")
    with subprocess.Popen(
        cmd,
        env=tools.perf_analyzer_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    ) as proc:
        if key and any(key in a for a in cmd):
            # a -H with the node's secret: once perf_analyzer has read its options, the command
            # line every local user can read shows a random mask instead (docs/security.md)
            hide_argument(proc.pid, key)
        try:
            stdout, stderr = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0] or ""
            raise PerfAnalyzerError(
                f"perf_analyzer did not finish within {limit:.0f} s: {line}\n{out[-3000:]}"
            ) from None
    return proc.returncode, (stdout or "") + (stderr or "")


def _run(
    cmd: list[str], timeout: float | None = None, verbose: bool = True, shown: str | None = None
) -> PerfResult:
    """Run perf_analyzer exactly as given (it must write -f CSV), print the line (`shown`, what
    the student typed, in place of the full command) and the raw output, parse the CSV. A server
    that is down or a model that is not READY fails within seconds; a run that never finishes is
    stopped after `timeout` (default: from the measurement interval and trials)."""
    csv_path = Path(perf_command.arg(cmd, "-f") or "")
    if csv_path == Path(""):
        raise ValueError("the command has no -f FILE.csv")
    if "-v" not in perf_flags.parse(cmd[1:]).flags:
        cmd = [*cmd, "-v"]  # its per-window lines are the intervals of claims
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    csv_path.unlink(missing_ok=True)
    line = perf_command.shell_line(cmd)
    if verbose:
        print(f"$ {shown or line}", flush=True)
    start = time.perf_counter()
    code, output = _execute(cmd, timeout or perf_command.timeout_s(cmd), line)
    if verbose:
        print(output.rstrip(), flush=True)
    kept = perf_command.without_secret(cmd)  # the result keeps no secret
    result = PerfResult(kept, line, output, code, time.perf_counter() - start)
    if code != 0 or not csv_path.is_file():
        raise PerfAnalyzerError(
            f"perf_analyzer exited with code {code}: {line}\n"
            f"{output.strip()[-3000:]}{perf_output.failure_hint(output)}"
        )
    result.table = perf_output.parse_csv(csv_path.read_text())
    result.extra["delayed_pct"] = perf_output.parse_delayed_pct(output)
    return result


def _measured(once, again, verbose: bool):
    """(once()'s run, its mode), or again()'s when once()'s windows never settled."""
    try:
        return once(), "windows"
    except PerfAnalyzerError as exc:
        if again is None or not perf_output.unsettled(str(exc)):
            raise
    if verbose:
        print(
            "\n-> the measurement windows did not settle (or saw no answer in time: a busy "
            "machine); measuring again with longer windows, accepting any spread between them\n",
            flush=True,
        )
    return again(), "windows, unsettled"


def _with_triton_view(model: str, url: str, metrics_url: str, verbose: bool, once, again=None):
    """Run once() (a perf_analyzer run) between two reads of the model's statistics, sampling
    utilisation meanwhile; again() is the retry when the windows did not settle (None: no retry)."""
    import requests

    try:
        before = triton_stats.model_stats(model, url)
    except (requests.RequestException, RuntimeError) as exc:
        raise PerfAnalyzerError(
            f"cannot reach Triton at {url} or its model {model!r}: is the server running and the "
            f"model READY? ({exc})"
        ) from None
    with triton_stats.Sampler(metrics_url) as sampler:
        result, mode = _measured(once, again, verbose)
    delta = triton_stats.stats_delta(before, triton_stats.model_stats(model, url))
    result.extra.update(
        mode="count" if perf_command.arg(result.command, "--request-count") else mode,
        avg_batch_size=round(delta["avg_batch_size"], 2),
        max_batch_size_seen=delta["max_batch_size_seen"],
        batch_executions=delta["batch_executions"],
        execution_ms=round(_execution_ms(result, delta), 3),
        **sampler.summary(),
    )
    result.extra.update(_laws(result, model, url))
    result.stats, result.utilisation = delta, sampler.over_time()
    if verbose:
        _say(result)
    return result


def _say(result: PerfResult) -> None:
    """What Triton saw of a run, printed after perf_analyzer's own output."""
    row = result.row
    util = {k[:-9]: v for k, v in row.items() if k.endswith("_util_pct")}
    late = row["delayed_pct"]
    print(
        f"Triton: model executions by batch size {row['batch_executions']}; mean utilisation "
        f"during the run: {', '.join(f'{k} {v:.0f}%' for k, v in util.items()) or 'not reported'}"
        + (f"; {late:.1f}% of the requests were sent late" if late else ""),
        flush=True,
    )
    if "busy_U" in row:
        print(queueing.laws_line(row), flush=True)
    if late > perf_output.DELAYED_LIMIT_PCT:
        print(
            f"WARNING: more than {perf_output.DELAYED_LIMIT_PCT:g}% of the requests left late: "
            "this run is not the open-loop load it claims (give perf_analyzer more threads, or "
            "a lower rate)",
            flush=True,
        )


def _execution_ms(result: PerfResult, delta: dict) -> float:
    """The time of one execution during perf_analyzer's measurement windows: its compute time per
    request (the windows' own), scaled by what Triton's batch statistics of the whole run say one
    execution took against that per-request mean (1 without batches: per request, Triton counts a
    batch's whole time for each request in it). Measured over the same windows as the
    throughput, so U = X·S compares like with like."""
    row = result.table.iloc[-1]
    per_request = sum(row[f"server_compute_{k}_ms"] for k in ("input", "infer", "output"))
    whole_run = sum(delta[f"compute_{k}_ms_avg"] for k in ("input", "infer", "output"))
    return per_request * (delta["execution_ms_avg"] / whole_run if whole_run else 1.0)


def _laws(result: PerfResult, model: str, url: str) -> dict:
    """The utilisation law and Little's law for the run's row (queueing.laws), with the instance
    count of the config Triton served (rounded, as the row shows them)."""
    try:
        served = triton_config.served_config(model, url)
    except Exception:  # noqa: BLE001 - the laws are extra; the run itself is measured
        return {}
    gpus = [g for group in served.get("instance_group", []) for g in group.get("gpus", [])]
    count = max(1, instances.instance_count(served, max(gpus, default=-1) + 1))
    row = result.row
    laws = queueing.laws(
        row["throughput_infer_s"],
        row.get("avg_latency_ms", row["p50_ms"]),
        row["execution_ms"],
        row["server_queue_ms"],
        batch=row["avg_batch_size"] or 1.0,
        instances=count,
        client_batch=max(1, int(float(perf_command.arg(result.command, "-b") or 1))),
    )
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in laws.items()}


def run_line(
    line: str,
    name: str,
    *,
    out: Path | None = None,
    url: str | None = None,
    metrics_url: str | None = None,
    timeout: float | None = None,
    verbose: bool = True,
) -> PerfResult:
    """Run a perf_analyzer command line as typed, e.g.
        perf_analyzer -m food_classifier -u triton_server:8000 --concurrency-range 8
    and read Triton's statistics and utilisation around it (from the server the line names). The
    results are named `name`: out/perf_<name>.csv (default results/perf/). Adds, and says so,
    -f/--verbose-csv/-v and the measurement settings the line leaves out; a run whose windows
    never agree, or see no answer (a machine too busy for the window), is measured again with the
    windows it added four times as long, accepting their spread (the row's mode says "windows,
    unsettled")."""
    argv = perf_command.split(line)
    url, metrics_url = perf_command.triton_of(argv, url, metrics_url)
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    cmd, settings, notes = perf_command.command(argv, (out or RESULTS / "perf") / f"perf_{tag}.csv")
    for note in notes if verbose else ():
        print(note, flush=True)
    relaxed = perf_command.relaxed(cmd, settings)
    once = lambda: _run(cmd, timeout=timeout, verbose=verbose, shown=line)  # noqa: E731
    again = relaxed and (lambda: _run(relaxed, timeout=timeout, verbose=verbose, shown=line))
    model = perf_command.arg(argv, "-m")
    result = _with_triton_view(model, url, metrics_url, verbose, once, again)
    result.extra.update(command=line, run=name)
    return result
