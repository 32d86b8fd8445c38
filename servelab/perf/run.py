"""perf_analyzer runs for the Triton notebooks: the line you typed, its own output, a parsed row.

Introduced in notebook 6.

    from servelab import perf
    c8 = perf.run_line(f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8", "c8")
    c8.row          # one parsed row (times in ms), with Triton's batch counts and utilisation
    c8.throughput   # inferences/s with the interval of perf_analyzer's windows (claims.Measured)
    c8.line         # your line, read once (perf.Line): c8.line.with_load("--concurrency-range 16")

run_line() runs the line as typed, adding only what the lab reads back, and says what it added
(servelab/perf/command.py); it reads perf_analyzer's output with servelab/perf/output.py, and
Triton's statistics and utilisation around the run with servelab/triton/triton_stats.py. Each row
carries the two laws (servelab/queueing.py's laws()). A run is an object: the notebook keeps it
and hands it to the verdicts, which never look a run up by its name.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

from servelab import passes, queueing
from servelab.paths import RESULTS
from servelab.perf import command as commands
from servelab.perf import output, saved, tool
from servelab.perf.line import Line
from servelab.perf.result import Run
from servelab.serving import argv_tail
from servelab.serving.triton_procs import hide_argument
from servelab.triton import instances, triton_config, triton_stats


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer failed; the message carries the command and the end of its output."""


def _off_the_command_line(cmd: list[str], key: str | None) -> tuple[list[str], dict]:
    """The command and environment that give perf_analyzer each `-H` holding the node's secret
    through its environment, not its command line (servelab/serving/argv_tail.py: a library
    that appends them to the argv its main() receives); where that library cannot be built
    (no C compiler), the command as it was."""
    env = tool.perf_analyzer_env()
    if not key:
        return cmd, env
    shown, hidden = [cmd[0]], []
    for i in range(1, len(cmd)):
        if cmd[i - 1] in ("-H", "--header") and key in cmd[i]:
            hidden += [shown.pop(), cmd[i]]
        else:
            shown.append(cmd[i])
    if not hidden:
        return cmd, env
    with_tail, why_not = argv_tail.environment(env, hidden)
    return (shown, with_tail) if not why_not else (cmd, env)


def _execute(cmd: list[str], limit: float, line: str) -> tuple[int, str]:
    """(exit code, stdout + stderr) of perf_analyzer, stopped after `limit` seconds."""
    key = os.environ.get("TRITON_ADMIN_KEY")
    cmd, env = _off_the_command_line(cmd, key)
    with subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    ) as proc:
        if key and any(key in a for a in cmd):
            # no library to keep it off (no C compiler): once perf_analyzer has read its
            # options, the command line every local user can read shows a random mask instead
            # (docs/security.md)
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


def _run(name: str, cmd: commands.Command, timeout: float | None, verbose: bool) -> Run:
    """Run perf_analyzer as `cmd` says (it writes the -f CSV), print the line the student typed
    and the raw output, parse the CSV. A server that is down or a model that is not READY fails
    within seconds; a run that never finishes is stopped after `timeout` (default: from the
    measurement interval and trials)."""
    cmd.csv_path.parent.mkdir(parents=True, exist_ok=True)
    cmd.csv_path.unlink(missing_ok=True)
    if verbose:
        print(f"$ {cmd.line}", flush=True)
    start = time.perf_counter()
    code, said = _execute(cmd.argv, timeout or cmd.timeout_s(), cmd.shell)
    if verbose:
        print(said.rstrip(), flush=True)
    if code != 0 or not cmd.csv_path.is_file():
        raise PerfAnalyzerError(
            f"perf_analyzer exited with code {code}: {cmd.shell}\n"
            f"{said.strip()[-3000:]}{output.failure_hint(said)}"
        )
    kept = commands.without_secret(cmd.argv)  # the run keeps no secret
    run = Run(name, cmd.line, kept, said, time.perf_counter() - start)
    run.table = output.parse_csv(cmd.csv_path.read_text())
    run.extra["delayed_pct"] = output.parse_delayed_pct(said)
    return run


def _measured(once, again, verbose: bool):
    """(once()'s run, its mode), or again()'s when once()'s windows never settled."""
    try:
        return once(), "windows"
    except PerfAnalyzerError as exc:
        if again is None or not output.unsettled(str(exc)):
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
        run, mode = _measured(once, again, verbose)
    delta = triton_stats.stats_delta(before, triton_stats.model_stats(model, url))
    run.extra.update(
        mode="count" if run.line.value("--request-count") else mode,
        avg_batch_size=round(delta["avg_batch_size"], 2),
        max_batch_size_seen=delta["max_batch_size_seen"],
        batch_executions=delta["batch_executions"],
        execution_ms=round(_execution_ms(run, delta), 3),
        **sampler.summary(),
    )
    run.stats, run.utilisation = delta, sampler.over_time()
    try:
        run.served_config = triton_config.served_config(model, url)
    except Exception:  # noqa: BLE001 - the laws are extra; the run itself is measured
        run.served_config = {}
    run.extra.update(_laws(run))
    if verbose:
        say(run)
    return run


def say(run: Run) -> None:
    """What Triton saw of a run, printed after perf_analyzer's own output."""
    row = run.row
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
    if late > output.DELAYED_LIMIT_PCT:
        print(
            f"WARNING: more than {output.DELAYED_LIMIT_PCT:g}% of the requests left late: "
            "this run is not the open-loop load it claims (give perf_analyzer more threads, or "
            "a lower rate)",
            flush=True,
        )


def _execution_ms(run: Run, delta: dict) -> float:
    """The time of one execution during perf_analyzer's measurement windows: its compute time per
    request (the windows' own), scaled by what Triton's batch statistics of the whole run say one
    execution took against that per-request mean (1 without batches: per request, Triton counts a
    batch's whole time for each request in it). Measured over the same windows as the
    throughput, so U = X·S compares like with like."""
    row = run.table.iloc[-1]
    per_request = sum(row[f"server_compute_{k}_ms"] for k in ("input", "infer", "output"))
    whole_run = sum(delta[f"compute_{k}_ms_avg"] for k in ("input", "infer", "output"))
    return per_request * (delta["execution_ms_avg"] / whole_run if whole_run else 1.0)


def _laws(run: Run) -> dict:
    """The utilisation law and Little's law for the run's row (queueing.laws), with the instance
    count of the config Triton served (rounded, as the row shows them)."""
    served = run.served_config
    if not served:
        return {}
    gpus = [g for group in served.get("instance_group", []) for g in group.get("gpus", [])]
    count = max(1, instances.instance_count(served, max(gpus, default=-1) + 1))
    row = run.row
    laws = queueing.laws(
        row["throughput_infer_s"],
        row.get("avg_latency_ms", row["p50_ms"]),
        row["execution_ms"],
        row["server_queue_ms"],
        batch=row["avg_batch_size"] or 1.0,
        instances=count,
        client_batch=max(1, int(float(run.line.value("-b") or 1))),
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
) -> Run:
    """Run a perf_analyzer line as typed, e.g.
        perf_analyzer -m food_classifier -u triton_server:8000 --concurrency-range 8
    and read Triton's statistics and utilisation around it (from the server the line names). The
    run is named `name`: out/perf_<name>.csv (default results/perf/). `line` is a perf.Line (the
    checker's, or with_load's), or text, then read here, once. Adds, and says so,
    -f/--verbose-csv/-v and the measurement settings the line leaves out; a run whose windows
    never agree, or see no answer (a machine too busy for the window), is measured again with the
    windows it added four times as long, accepting their spread (the row's mode says "windows,
    unsettled"). The measure pass keeps the run in the notebook's bundle (servelab/perf/saved.py);
    the review pass reads it from there, and nothing runs."""
    line = commands.model_line(line)

    def measure() -> Run:
        return _measure(line, name, out, url, metrics_url, timeout, verbose)

    run = passes.on_node(f"perf {name}", "perf", measure, save=saved.write, load=saved.read)
    return saved.same_run(run, line) if passes.replays() else run


def _measure(line: Line, name: str, out, url, metrics_url, timeout, verbose: bool) -> Run:
    """run_line's run on the node: the command, its retry, Triton's view around it."""
    url, metrics_url = commands.triton_of(line, url, metrics_url)
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    cmd = commands.command(line, (out or RESULTS / "perf") / f"perf_{tag}.csv")
    for note in cmd.notes if verbose else ():
        print(note, flush=True)
    relaxed = cmd.relaxed()
    once = lambda: _run(name, cmd, timeout, verbose)  # noqa: E731
    again = relaxed and (lambda: _run(name, relaxed, timeout, verbose))
    run = _with_triton_view(line.value("-m"), url, metrics_url, verbose, once, again)
    run.extra.update(command=str(line), run=name)
    return run


def with_load(line: str, load: str) -> Line:
    """Your line with another load (perf.Line.with_load): e.g. with_load(line_c8,
    "--concurrency-range 16"). A text line is read once here."""
    return Line.read(line).with_load(load)
