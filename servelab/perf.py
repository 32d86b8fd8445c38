"""perf_analyzer runs for the Triton notebooks: the command you type, its own output, a parsed row.

Introduced in notebook 6.

    from servelab import perf
    run = perf.run_line(f"perf_analyzer -m food_classifier -u {HOST} --concurrency-range 8", "a c8")
    run.row          # one parsed row (times in ms), with Triton's batch counts and utilisation
    run.throughput   # inferences/s with the interval of perf_analyzer's windows (claims.Measured)

run_line() runs the line as typed and adds only what the lab reads back: the CSV file (-f,
--verbose-csv), -v (each measurement window's numbers) and, when the line does not set them, the
measurement window length and stability of this run's settings (LAB_PERF_* in `make lab`); it
says what it added. Triton's shared-memory API needs the node's secret: a line with
`--shared-memory system|cuda` gets `-H lab-admin-key:$TRITON_ADMIN_KEY` (gRPC: the header
`triton-grpc-protocol-lab-admin-key`) unless it carries it, and `$TRITON_ADMIN_KEY` in a -H value
is read from the environment as a shell would; the key itself is never printed.

perf_analyzer writes one CSV row per load level (-f FILE); its times are microseconds. Here they
become milliseconds with these columns:
    concurrency | request_rate, throughput_infer_s, client_send_ms, network_server_send_recv_ms,
    server_queue_ms, server_compute_input_ms, server_compute_infer_ms, server_compute_output_ms,
    client_recv_ms, p50_ms, p90_ms, p95_ms, p99_ms (+ avg_latency_ms ... with --verbose-csv)

Where perf_analyzer is found and the environment it starts with: servelab/tools.py.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from servelab import labenv, perf_flags, tools
from servelab.paths import RESULTS
from servelab.serving.triton_procs import hide_argument

CSV_COLUMNS = {
    "Concurrency": "concurrency",
    "Request Rate": "request_rate",
    "Inferences/Second": "throughput_infer_s",
    "Client Send": "client_send_ms",
    "Network+Server Send/Recv": "network_server_send_recv_ms",
    "Server Queue": "server_queue_ms",
    "Server Compute Input": "server_compute_input_ms",
    "Server Compute Infer": "server_compute_infer_ms",
    "Server Compute Output": "server_compute_output_ms",
    "Client Recv": "client_recv_ms",
    "p50 latency": "p50_ms",
    "p90 latency": "p90_ms",
    "p95 latency": "p95_ms",
    "p99 latency": "p99_ms",
    "Avg latency": "avg_latency_ms",
    "request/response": "request_response_ms",
    "response wait": "response_wait_ms",
}
# columns that are not microseconds (kept as they are)
_NOT_US = {"Concurrency", "Request Rate", "Inferences/Second"}


class PerfAnalyzerError(RuntimeError):
    """perf_analyzer failed; the message carries the command and the end of its output."""


_HEADER_FLAGS = ("-H", "--header")
_ADMIN_NAMES = (labenv.ADMIN_HEADER, labenv.GRPC_ADMIN_HEADER)
_KEY_VARIABLES = ("${TRITON_ADMIN_KEY}", "$TRITON_ADMIN_KEY")


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


def with_admin_header(argv: list[str]) -> tuple[list[str], str]:
    """argv with the node's secret where Triton needs it, and a note saying what was added.

    Triton's shared-memory API (register/unregister, which perf_analyzer calls for
    --shared-memory system|cuda) answers only requests carrying labenv.ADMIN_HEADER (over gRPC:
    labenv.GRPC_ADMIN_HEADER). $TRITON_ADMIN_KEY in a -H value is replaced by the variable's value,
    as a shell would (run_line does not go through a shell)."""
    key = os.environ.get("TRITON_ADMIN_KEY", "")
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
    shared = (_arg(argv, "--shared-memory") or "none").lower()
    has_header = any(
        argv[i - 1] in _HEADER_FLAGS and _admin_header(argv[i]) for i in range(1, len(argv))
    )
    if shared == "none" or has_header or not key:
        return argv, ""
    grpc = (_arg(argv, "-i") or "http").lower() == "grpc"
    name = labenv.GRPC_ADMIN_HEADER if grpc else labenv.ADMIN_HEADER
    return [*argv, "-H", f"{name}:{key}"], f"-H {name}:$TRITON_ADMIN_KEY"


def _arg(cmd: list[str], flag: str) -> str | None:
    """The value of `flag` in a command, however it is spelt (-b16, --request-count=5, -p 1000 for
    --measurement-interval): read as perf_analyzer reads it, by servelab.perf_flags."""
    return perf_flags.value(cmd, flag)


def parse_csv(text: str):
    """perf_analyzer's -f CSV text -> pandas DataFrame (times in ms, columns as in CSV_COLUMNS)."""
    import pandas as pd

    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ValueError("empty perf_analyzer CSV")
    raw = pd.read_csv(io.StringIO("\n".join(lines)))
    table = pd.DataFrame(index=raw.index)
    for col in raw.columns:
        name = CSV_COLUMNS.get(col.strip())
        if name is None:  # e.g. GPU metrics with --collect-metrics: keep, snake_case
            table[re.sub(r"[^a-z0-9]+", "_", col.strip().lower()).strip("_")] = raw[col]
        elif col.strip() in _NOT_US:
            table[name] = pd.to_numeric(raw[col])
        else:
            table[name] = pd.to_numeric(raw[col]) / 1000.0
    return table


_PASS = re.compile(r"Pass \[\d+\] throughput: ([0-9.]+) infer/sec\. Avg latency: (\d+) usec")
_DELAYED = re.compile(r"([0-9.]+)% of the requests were delayed")
DELAYED_LIMIT_PCT = (
    5.0  # an open-loop run whose client fell further behind is not the load it claims
)


def parse_windows(output: str) -> list[dict]:
    """-v output -> the measurement windows of the last load level: throughput and mean latency."""
    headers = r"^Request (?:concurrency: \d+|Rate: [\d.]+ inference requests per seconds?)\s*$"
    last_level = re.split(headers, output, flags=re.M)[-1]
    return [
        {"throughput_infer_s": float(t), "avg_latency_ms": int(us) / 1000.0}
        for t, us in _PASS.findall(last_level)
    ]


def parse_delayed_pct(output: str) -> float:
    """perf_analyzer's own warning for request-rate runs: the share of requests it sent late."""
    found = _DELAYED.findall(output)
    return float(found[-1]) if found else 0.0


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
        return parse_windows(self.output)

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


def _default_timeout(cmd: list[str]) -> float:
    interval_s = float(_arg(cmd, "--measurement-interval") or 5000) / 1000
    trials = int(_arg(cmd, "--max-trials") or 10)
    levels = 1
    rng = _arg(cmd, "--concurrency-range") or _arg(cmd, "--request-rate-range") or "1"
    parts = rng.split(":")
    if len(parts) >= 2:
        start, end = float(parts[0]), float(parts[1])
        step = float(parts[2]) if len(parts) > 2 else 1.0
        levels = max(1, int((end - start) / step) + 1)
    if _arg(cmd, "--request-count"):
        return 120 + float(_arg(cmd, "--request-count")) * 1.0
    return levels * (interval_s * (trials + 1) + 15) + 30


def _run(
    cmd: list[str], timeout: float | None = None, verbose: bool = True, shown: str | None = None
) -> PerfResult:
    """Run perf_analyzer exactly as given (it must write -f CSV), print the line and the raw output,
    parse the CSV.

    `shown` is the line to print instead of the full command (run_line: what the student typed).
    -v is added when missing: its per-window lines are the intervals of claims. A server that is
    down or a model that is not READY fails within seconds; a run that never finishes is stopped
    after `timeout` (default: from the measurement interval and trials).
    """
    csv = _arg(cmd, "-f")
    if csv is None:
        raise ValueError("the command has no -f FILE.csv")
    if "-v" not in perf_flags.parse(cmd[1:]).flags:
        cmd = [*cmd, "-v"]
    csv_path = Path(csv)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    if csv_path.exists():
        csv_path.unlink()
    line = shell_line(cmd)
    limit = timeout if timeout is not None else _default_timeout(cmd)
    if verbose:
        print(f"$ {shown or line}", flush=True)
    start = time.perf_counter()
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
    seconds = time.perf_counter() - start
    output = (stdout or "") + (stderr or "")
    if verbose:
        print(output.rstrip(), flush=True)
    # the node's secret stays out of the result (a notebook may show run.command)
    key = os.environ.get("TRITON_ADMIN_KEY")
    kept = [a.replace(key, "$TRITON_ADMIN_KEY") if key else a for a in cmd]
    result = PerfResult(kept, line, output, proc.returncode, seconds)
    if proc.returncode != 0 or not csv_path.is_file():
        hint = ""
        if "stable measurement" in output:
            hint = (
                "\nHint: the load did not settle; use a longer measurement_interval_ms, a larger "
                "stability_percentage, or request_count=N for a fixed number of requests."
            )
        elif "is restricted, expecting header" in output:
            hint = (
                "\nHint: Triton's shared-memory API needs the node's secret: add "
                "-H lab-admin-key:$TRITON_ADMIN_KEY (gRPC: -H "
                "triton-grpc-protocol-lab-admin-key:$TRITON_ADMIN_KEY) with TRITON_ADMIN_KEY set "
                "(the lab's Jupyter has it)."
            )
        elif (
            "failed to get model metadata" in output
            or "Connection refused" in output
            or "Couldn't connect" in output
        ):
            hint = (
                "\nHint: is Triton running at that address, and is the model READY "
                "(GET /v2/models/<m>/ready)?"
            )
        raise PerfAnalyzerError(
            f"perf_analyzer exited with code {proc.returncode}: {line}\n"
            f"{output.strip()[-3000:]}{hint}"
        )
    result.table = parse_csv(csv_path.read_text())
    result.extra["delayed_pct"] = parse_delayed_pct(output)
    return result


def _with_triton_view(
    model: str, url: str | None, metrics_url: str | None, verbose: bool, once, again=None
):
    """Run once() (a perf_analyzer run) between two reads of the model's statistics, sampling
    utilisation meanwhile; again() is the retry when the windows did not settle (None: no retry)."""
    import requests

    from servelab import triton_stats

    try:
        before = triton_stats.model_stats(model, url)
    except (requests.RequestException, RuntimeError) as exc:
        raise PerfAnalyzerError(
            f"cannot reach Triton at {url or 'TRITON_SERVER_URL'} or its model "
            f"{model!r}: is the server running and the model READY? ({exc})"
        ) from None
    mode = "windows"
    with triton_stats.UtilisationSampler(metrics_url) as sampler:
        try:
            result = once()
        except PerfAnalyzerError as exc:
            unsettled = "stable measurement" in str(exc) or "No valid requests" in str(exc)
            if again is None or not unsettled:
                raise
            if verbose:
                print(
                    "\n-> the measurement windows did not settle (or saw no answer in time: a busy "
                    "machine); measuring again with longer windows, accepting any spread between "
                    "them\n",
                    flush=True,
                )
            result = again()
            mode = "windows, unsettled"
    if _arg(result.command, "--request-count"):
        mode = "count"
    delta = triton_stats.stats_delta(before, triton_stats.model_stats(model, url))
    result.extra.update(
        {
            "mode": mode,
            "avg_batch_size": round(delta["avg_batch_size"], 2),
            "max_batch_size_seen": delta["max_batch_size_seen"],
            "batch_executions": delta["batch_executions"],
            "execution_ms": round(_execution_ms(result, delta), 3),
            **sampler.summary(),
        }
    )
    result.extra.update(_laws(result, model, url))
    result.stats = delta
    result.utilisation = sampler.over_time()
    if verbose:
        util = {k: v for k, v in result.extra.items() if k.endswith("_util_pct")}
        late = result.extra["delayed_pct"]
        print(
            f"Triton: model executions by batch size {delta['batch_executions']}; mean utilisation "
            "during the run: "
            f"{', '.join(f'{k[:-9]} {v:.0f}%' for k, v in util.items()) or 'not reported'}"
            + (f"; {late:.1f}% of the requests were sent late" if late else ""),
            flush=True,
        )
        if "busy_U" in result.extra:
            print(laws_line(result.row), flush=True)
        if late > DELAYED_LIMIT_PCT:
            print(
                f"WARNING: more than {DELAYED_LIMIT_PCT:g}% of the requests left late: this run is "
                "not the open-loop load it claims (give perf_analyzer more threads, or a lower "
                "rate)",
                flush=True,
            )
    return result


def laws_line(row: dict) -> str:
    """The two laws of a run's row in words, as run_line prints them after each run."""
    return (
        f"laws: U = X·S = {row['busy_U']:.2f} (each of {row['instances']} instance(s) busy "
        f"{row['busy_U']:.0%} of the time, {row['execution_ms']:.3g} ms per execution); "
        f"N = X·R = {row['in_flight_N']:.1f} requests in flight, "
        f"{row['waiting_N']:.1f} of them waiting in Triton's queue"
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


def _laws(result: PerfResult, model: str, url: str | None) -> dict:
    """The utilisation law and Little's law for the run's row (queueing.run_laws), with the
    instance count of the config Triton served (rounded, as the row shows them)."""
    from servelab import queueing, triton_config

    try:
        served = triton_config.served_config(model, url)
    except Exception:  # noqa: BLE001 - the laws are extra; the run itself is measured
        return {}
    gpus = [g for group in served.get("instance_group", []) for g in group.get("gpus", [])]
    instances = triton_config.instance_count(served, max(gpus, default=-1) + 1)
    row = {**result.table.iloc[-1].to_dict(), **result.extra}
    laws = queueing.run_laws(
        row["throughput_infer_s"],
        row.get("avg_latency_ms", row["p50_ms"]),
        row["server_queue_ms"],
        row["execution_ms"],
        batch=row["avg_batch_size"] or 1.0,
        instances=instances,
        client_batch=int(float(_arg(result.command, "-b") or 1)),
    )
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in laws.items()}


# What the lab adds to a typed line when the line does not set it: the length of the measurement
# windows and how much they may disagree (make lab's quick runs shorten them).
def measurement_settings() -> dict[str, str]:
    return {
        "--measurement-interval": os.environ.get("LAB_PERF_INTERVAL_MS", "5000"),
        "--stability-percentage": os.environ.get("LAB_PERF_STABILITY", "20"),
        "--max-trials": os.environ.get("LAB_PERF_MAX_TRIALS", "10"),
    }


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
    and read Triton's statistics and utilisation around it. The results are named `name`:
    out/perf_<name>.csv (default results/perf/). Adds, and says so, -f/--verbose-csv/-v and the
    measurement settings the line leaves out; a run whose windows never agree, or see no answer
    (a machine too busy for the window), is measured again with the windows it added four times
    as long, accepting their spread (the row's mode says "windows, unsettled")."""
    argv = shlex.split(line)
    if not argv or Path(argv[0]).name != "perf_analyzer":
        raise ValueError(f"not a perf_analyzer command: {line!r}")
    model = _arg(argv, "-m")
    if model is None:
        raise ValueError("the command names no model (-m NAME)")
    if url is None and _arg(argv, "-u") and (_arg(argv, "-i") or "http").lower() == "http":
        url = (
            f"http://{_arg(argv, '-u')}"  # Triton's statistics come from the server the line names
        )
    tag = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    csv_path = (out or RESULTS / "perf") / f"perf_{tag}.csv"
    typed = perf_flags.parse(argv[1:]).flags  # the line's flags, whatever their spelling
    settings = {k: v for k, v in measurement_settings().items() if k not in typed}
    if "--request-count" in typed:
        settings.pop("--stability-percentage", None)  # the count decides the length
    elif "--request-rate-range" in typed:
        # a fixed rate decides the load: three windows, whatever their spread (an overloaded server
        # never settles, and that spread is the finding)
        settings.update({"--stability-percentage": "1000", "--max-trials": "3"})
    plumbing = ["-f", str(csv_path)] + [f for f in ("--verbose-csv", "-v") if f not in typed]
    argv, secret_note = with_admin_header(argv)
    cmd = [
        tools.perf_analyzer_path(),
        *argv[1:],
        *[x for kv in settings.items() for x in kv],
        *plumbing,
    ]
    if verbose and settings:
        print(
            "(measurement settings of this run, added to the line: "
            + " ".join(f"{k} {v}" for k, v in settings.items())
            + ")",
            flush=True,
        )
    if verbose and secret_note:
        print(f"(Triton's shared-memory API needs the node's secret: added {secret_note})")
    once = lambda: _run(cmd, timeout=timeout, verbose=verbose, shown=line)  # noqa: E731
    again = None
    relaxed = [*cmd]
    if "--stability-percentage" in settings:
        relaxed[relaxed.index("--stability-percentage") + 1] = "1000"
    if "--measurement-interval" in settings:
        at = relaxed.index("--measurement-interval") + 1
        relaxed[at] = str(4 * int(relaxed[at]))
    if relaxed != cmd:
        again = lambda: _run(relaxed, timeout=timeout, verbose=verbose, shown=line)  # noqa: E731
    result = _with_triton_view(model, url, metrics_url, verbose, once, again)
    result.extra["command"] = line
    result.extra["run"] = name
    return result


# ---------------------------------------------------------------- the rows, with the laws

# what a step's table shows of each run: the load, what came back, and the two laws
TABLE_COLUMNS = [
    "concurrency",
    "request_rate",
    "throughput_infer_s",
    "avg_latency_ms",
    "p50_ms",
    "p99_ms",
    "server_queue_ms",
    "execution_ms",
    "avg_batch_size",
    "instances",
    "busy_U",
    "in_flight_N",
    "waiting_N",
    "delayed_pct",
]


def table(runs: dict, names=None):
    """The runs named (all by default) as one table, a row per run: the load (concurrency or
    request_rate), throughput, mean, median and p99 latency, Triton's queue, the time of one
    execution, the mean batch, the instances, the utilisation law (busy_U) and Little's law
    (in_flight_N, waiting_N), and each device's mean utilisation."""
    import pandas as pd

    rows = [{"run": name, **runs[name].row} for name in (names or list(runs))]
    frame = pd.DataFrame(rows).set_index("run")
    util = [c for c in frame if c.endswith("_util_pct")]
    shown = [c for c in TABLE_COLUMNS if c in frame and frame[c].notna().any()] + util
    if "request_rate" not in shown and "delayed_pct" in shown:  # only a rate run can send late
        shown.remove("delayed_pct")
    return frame[shown].round(3)


def against_model(frame, model_ms):
    """`frame` (from table()) with the queueing model's mean latency beside each measured one:
    model_ms (one per row) and measured_over_model."""
    frame = frame.copy()
    frame["model_ms"] = [round(float(m), 3) for m in model_ms]
    frame["measured_over_model"] = (frame["avg_latency_ms"] / frame["model_ms"]).round(2)
    return frame


def model_readings(frame, alone_ms, open_loop: bool = False) -> None:
    """Print, for each row of against_model()'s frame, queueing.model_miss's sentence: the model
    within ±30 %, or which of its assumptions the run broke (read from the row's laws, its service
    time against `alone_ms`, the one the model was given: one per row, or one for all, and, for
    open-loop runs, the latency's tail p99 / median)."""
    from servelab import queueing

    alone = list(alone_ms) if hasattr(alone_ms, "__len__") else [alone_ms] * len(frame)
    for (name, row), service in zip(frame.iterrows(), alone):
        tail = row["p99_ms"] / row["p50_ms"] if open_loop and row["p50_ms"] else None
        said = queueing.model_miss(
            row["model_ms"],
            row["avg_latency_ms"],
            row["busy_U"],
            service,
            row["execution_ms"],
            open_loop=open_loop,
            tail=tail,
        )
        print(f"{name}: {said}")
