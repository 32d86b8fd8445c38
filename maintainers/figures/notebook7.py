"""Figures of notebook 7 (how close to the hardware) on its pages: the H100's (the notebook of
2026-11-24) and the H200's (the notebook at its current version): the notebook's own run
(results/hardware/), the best configuration on separately started servers (results/stability/,
on the H200 with where each start's gap to the limit goes), and the maintainers' levers
experiment kept with the H100 page (levers/). The helpers read the H100 page unless told `at`."""

from __future__ import annotations

import re
import statistics

import numpy as np
import pandas as pd

from maintainers.figures.core import figure
from maintainers.figures.pages import page

H100 = ("h100", "07_how_close_to_the_hardware")
H200 = ("h200", "07_how_close_to_the_hardware")
COMPILED = "torch.compile fp16 + CUDA graph"
GRAPH = "fp16 channels_last + CUDA graph"
FLOAT_REQUEST_BYTES = 3 * 224 * 224 * 4  # one image as 7.2 sends it: a float32 tensor


def rows(at: tuple = H100) -> pd.DataFrame:
    return page(*at).summary("hardware")


def row(run: str, at: tuple = H100) -> pd.Series:
    return rows(at).loc[run]


def step(prefix: str) -> pd.Series:
    """The first row of a step whose run name starts with prefix (e.g. '7.6 8 inst')."""
    return rows().loc[next(r for r in rows().index if r.startswith(prefix))]


def served(at: tuple = H100) -> dict:
    return page(*at).json("results/hardware/served_over_limit.json")


def limit(at: tuple = H100) -> float:
    return served(at)["limit"]["images_per_s"]


def raw(path: str, batch: int | None = None) -> float:
    """The raw model's images/s on a path, at a batch (None: its best batch)."""
    table = page(*H100).csv("results/hardware/raw_limit.csv")
    table = table[table.path == path]
    if batch is None:
        return table.images_per_s.max()
    return table[table.batch == batch].images_per_s.iloc[0]


def raw_ms(path: str, batch: float, at: tuple = H100) -> float:
    """ms the raw model takes for a batch, its throughput read off the measured batches."""
    table = page(*at).csv("results/hardware/raw_limit.csv")
    table = table[table.path == path].sort_values("batch")
    return 1000 * batch / np.interp(batch, table.batch, table.images_per_s)


def stability(at: tuple = H100) -> dict:
    return page(*at).json("results/stability/starts.json")


def fresh_ratios(at: tuple = H100) -> list[float]:
    return [s["served_over_limit"] for s in stability(at)["starts"]]


def in_one_start(at: tuple = H100) -> list[float]:
    return served(at)["repeats_served_over_limit"]


def best(at: tuple = H100) -> pd.Series:
    return row(served(at)["best"], at)


def executions_per_s(r: pd.Series) -> float:
    return r.throughput_infer_s / r.avg_batch_size


def gains() -> dict[str, float]:
    """Each step's gain in served throughput over the step before it, on the page's run."""
    start, uint8 = row("7.2 start"), row("7.3 uint8 HTTP")
    fp16, graphs = row("7.5 + fp16"), row("7.5 + CUDA graphs")
    sweep, compiled = step("7.6 8 inst"), step("7.7 compiled")
    x = "throughput_infer_s"
    return {
        "the sweep": sweep[x] / graphs[x],
        "CUDA graphs": graphs[x] / fp16[x],
        "compile": compiled[x] / sweep[x],
        "uint8": uint8[x] / start[x],
    }


def claim(name: str) -> pd.Series:
    claims = page(*H100).csv("results/hardware/claims.csv", index="claim")
    return claims.loc[next(c for c in claims.index if c.startswith(name))]


def levers(config: str) -> pd.Series:
    return page(*H100).csv("levers/levers.csv", index="config").loc[config]


@figure("h100_7_day")
def day() -> str:
    return page(*H100).day("hardware")


@figure("h100_7_stability_day")
def stability_day() -> str:
    return page(*H100).day("stability")


@figure("h100_7_minutes")
def minutes() -> str:
    return f"{page(*H100).minutes('hardware'):.1f} min"


@figure("h100_7_limit")
def limit_figure() -> str:
    return f"{limit():,.0f}"


@figure("h100_7_in_one_start")
def in_one_start_figure() -> str:
    first, second = in_one_start()
    return f"{first:.2f} and {second:.2f}"


@figure("h100_7_in_one_start_served")
def in_one_start_served() -> str:
    runs = [best(), row("7.8 repeat 2")]
    return f"{runs[0].throughput_infer_s:,.0f} and {runs[1].throughput_infer_s:,.0f}"


@figure("h100_7_fresh_starts")
def fresh_starts() -> str:
    r = fresh_ratios()
    return f"{', '.join(f'{x:.3f}' for x in r[:-1])} and {r[-1]:.3f}"


@figure("h100_7_fresh_starts_short")
def fresh_starts_short() -> str:
    r = fresh_ratios()
    return f"{', '.join(f'{x:.2f}' for x in r[:-1])} and {r[-1]:.2f}"


@figure("h100_7_fresh_median")
def fresh_median() -> str:
    return f"{statistics.median(fresh_ratios()):.3f}"


@figure("h100_7_fresh_count")
def fresh_count() -> str:
    count = len(fresh_ratios())
    return {2: "two", 3: "three", 4: "four", 5: "five"}.get(count, str(count))


@figure("h100_7.1_limits")
def limits_71() -> str:
    eager = raw("eager fp32")
    return (
        f"{limit():,.0f} images/s at batch {served()['limit']['batch']}: "
        f"{limit() / eager:.1f}x plain fp32's best and {limit() / raw(GRAPH):.1f}x fp16 + CUDA "
        f"graph ({raw(GRAPH):,.0f})"
    )


@figure("h100_7.1_eager")
def eager_71() -> str:
    one, top = raw("eager fp32", 1), raw("eager fp32", 256)
    return f"{one:,.0f} images/s at batch 1, {top:,.0f} at batch 256 ({top / one:.0f}x)"


@figure("h100_7_limit_batch")
def limit_batch() -> str:
    return str(served()["limit"]["batch"])


@figure("h100_7_graph_limit")
def graph_limit() -> str:
    return f"{raw(GRAPH):,.0f}"


@figure("h100_7.2_prediction")
def prediction_72() -> str:
    start = row("7.2 start")
    return (
        f"about {start.throughput_infer_s / limit():.2f} ({start.throughput_infer_s:,.0f} "
        f"infer/s against the compiled limit of {limit():,.0f} images/s)"
    )


@figure("h100_7.2_start")
def start_72() -> str:
    s = row("7.2 start")
    server = s.server_queue_ms + s.server_compute_input_ms + s.server_compute_infer_ms
    server += s.server_compute_output_ms
    return (
        f"{s.throughput_infer_s:,.0f} infer/s; of the server's {server:.0f} ms per request, "
        f"{s.server_queue_ms:.0f} ms is queue; {s.execution_ms:.1f} ms per execution of about "
        f"{s.avg_batch_size:.0f} images"
    )


@figure("h100_7.2_bytes")
def bytes_72() -> str:
    return (
        f"{FLOAT_REQUEST_BYTES:,} bytes: at the compiled limit's rate that would be about "
        f"{FLOAT_REQUEST_BYTES * limit() / 1e9:.0f} GB/s"
    )


@figure("h100_7.3_uint8")
def uint8_73() -> str:
    start, uint8 = row("7.2 start"), row("7.3 uint8 HTTP")
    return (
        f"{uint8.throughput_infer_s / start.throughput_infer_s:.2f}x the start on the H100 "
        f"({uint8.throughput_infer_s:,.0f} infer/s)"
    )


def transports() -> dict[str, list[float]]:
    return served()["transport"]["runs_infer_s"]


@figure("h100_7.4_rounds")
def rounds_74() -> str:
    parts = [f"{name} {min(x):,.0f}–{max(x):,.0f}" for name, x in transports().items()]
    count = {len(x) for x in transports().values()}
    return f"{', '.join(parts)} infer/s ({'/'.join(map(str, sorted(count)))} runs each)"


@figure("h100_7.4_chosen")
def chosen_74() -> str:
    return served()["transport"]["chosen"]


@figure("h100_7.4_queue")
def queue_74() -> str:
    """The queue over every run of 7.4's comparison: three rounds of the three transports (the
    first round's runs are the summary's 7.3 and 7.4 rows)."""
    first = ("perf_7.3_uint8_HTTP", "perf_7.4_uint8_gRPC", "perf_7.4_uint8_gRPC_shm")
    kinds = ("HTTP", "gRPC", "gRPC_shared_memory")
    files = [*first, *(f"perf_7.4_round_{r}_{k}" for r in (2, 3) for k in kinds)]
    queues = [
        page(*H100).csv(f"results/hardware/{f}.csv")["Server Queue"].iloc[0] / 1000 for f in files
    ]
    return f"{min(queues):.1f} to {max(queues):.1f} ms (the {len(queues)} runs)"


@figure("h100_7.4_send")
def send_74() -> str:
    c = claim("7.4: with shared memory the client's send time")
    low, high = (float(x) for x in re.findall(r"[\d.]+", c.interval))
    return f"{float(c.value):.1f}x [{low:.1f}, {high:.1f}]"


@figure("h100_7.5_fp16")
def fp16_75() -> str:
    shm, fp16 = row("7.4 uint8 gRPC + shm"), row("7.5 + fp16")
    return (
        f"{shm.throughput_infer_s:,.0f} to {fp16.throughput_infer_s:,.0f} infer/s, compute per "
        f"execution {shm.execution_ms:.2f} → {fp16.execution_ms:.2f} ms"
    )


@figure("h100_7.5_graphs")
def graphs_75() -> str:
    fp16, graphs = row("7.5 + fp16"), row("7.5 + CUDA graphs")
    return (
        f"{graphs.throughput_infer_s:,.0f} infer/s "
        f"({graphs.throughput_infer_s / fp16.throughput_infer_s:.2f}x), compute per execution "
        f"{graphs.execution_ms:.2f} ms ({graphs.execution_ms / fp16.execution_ms:.2f}x)"
    )


def fp16_agreement() -> dict[str, str]:
    numbers = claim("7.5: fp16's logits").numbers
    return dict(re.findall(r"(\w+) = ([^,]+)", numbers))


@figure("h100_7.5_logits")
def logits_75() -> str:
    a = fp16_agreement()
    diff, spread = float(a["max_abs_diff"]), float(a["logit_spread"])
    changed = int(a["inputs"]) - int(a["same_top_class"])
    return (
        f"at most {diff:.2f} of a spread of {spread:.1f} ({diff / spread * 100:.0f} %); "
        f"{changed} of "
        f"{a['inputs']} photos changed class, where fp32 decided only {a['decided_clearly']} of "
        f"the {a['inputs']} clearly"
    )


def sweep_rows() -> list[pd.Series]:
    return [rows().loc[r] for r in rows().index if r.startswith("7.6 ")]


@figure("h100_7.6_sweep")
def sweep_76() -> str:
    runs = sweep_rows()
    counts = " / ".join(str(int(r.instances)) for r in runs)
    served_ = " / ".join(f"{r.throughput_infer_s:,.0f}" for r in runs)
    batches = [r.avg_batch_size for r in runs]
    return (
        f"{served_} infer/s at {counts} instances with max batch 64; the batcher filled its "
        f"batches (average {min(batches):.1f} to {max(batches):.1f} of 64)"
    )


@figure("h100_7.6_p99")
def p99_76() -> str:
    top = step("7.6 8 inst")
    return f"8 instances × 64 (p99 {top.p99_ms:.0f} ms)"


@figure("h100_7.7_compiled")
def compiled_77() -> str:
    compiled, sweep = step("7.7 compiled"), step("7.6 8 inst")
    return (
        f"{compiled.throughput_infer_s:,.0f} infer/s against {sweep.throughput_infer_s:,.0f} "
        f"without compile ({compiled.throughput_infer_s / sweep.throughput_infer_s:.2f}x)"
    )


def parts(r: pd.Series, named: bool = True) -> str:
    names = ("input ", "infer ", "output ") if named else ("", "", "")
    values = (r.server_compute_input_ms, r.server_compute_infer_ms, r.server_compute_output_ms)
    return " + ".join(f"{n}{v:.1f}" for n, v in zip(names, values)) + " ms"


@figure("h100_7.7_parts")
def parts_77() -> str:
    compiled, sweep = step("7.7 compiled"), step("7.6 8 inst")
    return (
        f"{parts(compiled)} at batches of {compiled.avg_batch_size:.0f}, against "
        f"{parts(sweep, named=False)} at {sweep.avg_batch_size:.0f} without"
    )


@figure("h100_7.7_raw")
def raw_77() -> str:
    batch = step("7.7 compiled").avg_batch_size
    return f"about {raw_ms(COMPILED, batch):.1f} ms for {batch:.0f} images"


def laws_at(at: tuple) -> str:
    b = best(at)
    rate = executions_per_s(b)
    instances = int(b.instances)
    return (
        f"U = {rate:.0f} executions/s × {b.execution_ms:.2f} ms / {instances} instances = "
        f"{rate * b.execution_ms / 1000 / instances:.2f}"
    )


@figure("h100_7_laws")
def laws() -> str:
    return laws_at(H100)


@figure("h100_7_raw_share")
def raw_share() -> str:
    b = best()
    model = raw_ms(COMPILED, b.avg_batch_size)
    return (
        f"{model:.2f} ms of the {b.execution_ms:.2f} ms per execution "
        f"({b.execution_ms / model:.1f}x; the GPU {b.gpu0_util_pct:.0f} % busy)"
    )


@figure("h100_7_execution_over_model")
def execution_over_model() -> str:
    b = best()
    return f"{b.execution_ms / raw_ms(COMPILED, b.avg_batch_size):.1f}x"


@figure("h100_7_request_parts")
def request_parts() -> str:
    b = best()
    total = b.server_compute_input_ms + b.server_compute_infer_ms + b.server_compute_output_ms
    return f"{total:.1f} ms"


@figure("h100_7_gains")
def gains_figure() -> str:
    """Hand-in 2: the steps by their gain, largest first (a new run may reorder them)."""
    ordered = sorted(gains().items(), key=lambda kv: -kv[1])
    sweep = step("7.6 8 inst").throughput_infer_s
    graphs = row("7.5 + CUDA graphs").throughput_infer_s
    first, *rest = ordered
    detail = f" ({first[1]:.2f}x)"
    if first[0] == "the sweep":
        detail = f" ({graphs:,.0f} to {sweep:,.0f} infer/s, {first[1]:.1f}x)"
    others = ", ".join(f"{name} ({gain:.2f}x)" for name, gain in rest[:-1])
    return f"{first[0]} gained most{detail}, then {others} and {rest[-1][0]} ({rest[-1][1]:.2f}x)"


@figure("h100_7_best")
def best_figure() -> str:
    ratios = in_one_start()
    top = max(ratios)
    served_ = max(best().throughput_infer_s, row("7.8 repeat 2").throughput_infer_s)
    return f"{top:.2f} ({served_:,.0f} / {limit():,.0f}"


@figure("h100_7_levers_cuda_shm_infer")
def levers_cuda_shm_infer() -> str:
    return f"{levers('cudashm-8x64').throughput_infer_s:,.0f}"


@figure("h100_7_levers_system_shm_infer")
def levers_system_shm_infer() -> str:
    return f"{levers('sysshm-8x64').throughput_infer_s:,.0f}"


@figure("h100_7_levers_cuda_shm_plain")
def levers_cuda_shm_plain() -> str:
    cuda, system = levers("cudashm-8x64"), levers("sysshm-8x64")
    return f"{cuda.throughput_infer_s:,.0f} against {system.throughput_infer_s:,.0f} infer/s"


@figure("h100_7_levers_input_ms")
def levers_input_ms() -> str:
    system, cuda = levers("sysshm-8x64"), levers("cudashm-8x64")
    return f"{system.server_compute_input_ms:.1f} to {cuda.server_compute_input_ms:.1f} ms"


@figure("h100_7_levers_output_ms")
def levers_output_ms() -> str:
    system, cuda = levers("sysshm-8x64"), levers("cudashm-8x64")
    return f"{system.server_compute_output_ms:.1f} to {cuda.server_compute_output_ms:.1f} ms"


# The H200's page: notebook 7 at its current version (2026-11-28), and the best configuration's
# fresh starts with where each start's gap to the limit goes (results/stability/starts.json).

NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five"}


def _span(values: list[float], digits: int) -> str:
    low, high = min(values), max(values)
    return (
        f"{low:.{digits}f}"
        if f"{low:.{digits}f}" == f"{high:.{digits}f}"
        else (f"{low:.{digits}f}–{high:.{digits}f}")
    )


def _parts(at: tuple = H200) -> list[dict]:
    return [s["parts"] for s in stability(at)["starts"] if "parts" in s]


@figure("h200_7_day")
def h200_day() -> str:
    return page(*H200).day("hardware")


@figure("h200_7_minutes")
def h200_minutes() -> str:
    return f"{page(*H200).minutes('hardware'):.1f} min"


@figure("h200_7_calls")
def h200_calls() -> str:
    calls = page(*H200).json("runs.json")["hardware"].get("calls", 1)
    return NUMBERS.get(calls, str(calls))


@figure("h200_7_limit")
def h200_limit() -> str:
    return f"{limit(H200):,.0f}"


@figure("h200_7_limit_batch")
def h200_limit_batch() -> str:
    return str(served(H200)["limit"]["batch"])


@figure("h200_7_in_one_start")
def h200_in_one_start() -> str:
    first, second = in_one_start(H200)
    return f"{first:.2f} and {second:.2f}"


@figure("h200_7_in_one_start_served")
def h200_in_one_start_served() -> str:
    runs = [best(H200), row("7.8 repeat 2", H200)]
    return f"{runs[0].throughput_infer_s:,.0f} and {runs[1].throughput_infer_s:,.0f}"


@figure("h200_7_fresh_count")
def h200_fresh_count() -> str:
    count = len(fresh_ratios(H200))
    return NUMBERS.get(count, str(count))


@figure("h200_7_fresh_starts")
def h200_fresh_starts() -> str:
    r = fresh_ratios(H200)
    return f"{', '.join(f'{x:.3f}' for x in r[:-1])} and {r[-1]:.3f}"


@figure("h200_7_fresh_median")
def h200_fresh_median() -> str:
    return f"{statistics.median(fresh_ratios(H200)):.3f}"


@figure("h200_7_fresh_served")
def h200_fresh_served() -> str:
    served_ = [s["infer_s"] for s in stability(H200)["starts"] if "infer_s" in s]
    return f"{', '.join(f'{x:,.0f}' for x in served_[:-1])} and {served_[-1]:,.0f} infer/s"


@figure("h200_7_fresh_loads")
def h200_fresh_loads() -> str:
    loads = [s["load_s"] for s in stability(H200)["starts"] if "load_s" in s]
    return f"{min(loads):.0f} to {max(loads):.0f} s"


@figure("h200_7_start_seconds")
def h200_start_seconds() -> str:
    """A whole fresh start: the server's start and load, the counted run, the stop."""
    whole = [s["seconds"] for s in stability(H200)["starts"]]
    return f"{min(whole):.0f} to {max(whole):.0f} s"


@figure("h200_7_longest_cell")
def h200_longest_cell() -> str:
    cells = page(*H200).json("07_how_close_to_the_hardware_cell_times.json")
    return f"{max(c['seconds'] for c in cells):.0f} s"


@figure("h200_7_gap")
def h200_gap() -> str:
    """served/limit = the GPU's busy share x its rate when busy over the limit, per start."""
    parts = _parts()
    busy = [p["gpu_busy"] for p in parts]
    rate = [p["served_per_busy_s_over_limit"] for p in parts]
    return f"the GPU busy {_span(busy, 2)} of the time, and {_span(rate, 2)} of the limit when busy"


@figure("h200_7_cycle")
def h200_cycle() -> str:
    """Each execution's cycle in a stub: the time between two executions against the whole."""
    parts = _parts()
    between = [p["cycle_ms"]["between"] for p in parts]
    cycle = [sum(p["cycle_ms"].values()) for p in parts]
    share = [b / c * 100 for b, c in zip(between, cycle, strict=True)]
    return (
        f"{_span(between, 1)} ms of each instance's {_span(cycle, 1)} ms cycle "
        f"({_span(share, 0)} %)"
    )


@figure("h200_7_device")
def h200_device() -> str:
    """The stub's device phase and the GPU's own share of it by CUDA events, per execution."""
    parts = _parts()
    copy = [p["gpu_ms"]["copy"] for p in parts]
    graph = [p["gpu_ms"]["graph"] for p in parts]
    batch = [p["mean_batch"] for p in parts]
    padded = [p["mean_padded_batch"] for p in parts]
    return (
        f"batches of {_span(batch, 0)} requests ({_span(padded, 0)} padded to a graph's size), "
        f"the copy to the GPU {_span(copy, 1)} ms and the graph {_span(graph, 1)} ms per execution"
    )


@figure("h200_7_cores")
def h200_cores() -> str:
    cores = [p["cores"] for p in _parts()]
    busy = [c["machine_busy"] for c in cores]
    server, stubs = [c["tritonserver"] for c in cores], [c["stubs"] for c in cores]
    machine = page(*H200).json("runs.json")["hardware"]["versions"]["cpu_cores"]
    return (
        f"{_span(busy, 1)} of the {machine} cores busy (tritonserver {_span(server, 1)}, the "
        f"{cores[0]['stubs_processes']} stubs {_span(stubs, 1)})"
    )


@figure("h200_7_raw_at_max_batch")
def h200_raw_at_max_batch() -> str:
    """The raw compiled model at the best configuration's largest batch, against the limit."""
    table = page(*H200).csv("results/hardware/raw_limit.csv")
    table = table[table.path == COMPILED]
    largest = int(re.search(r"max batch (\d+)", served(H200)["best"])[1])
    at = table[table.batch == largest].images_per_s.iloc[0]
    return f"{at:,.0f} images/s at batch {largest}, {at / limit(H200):.2f} of the limit"


@figure("h200_7_laws")
def h200_laws() -> str:
    return laws_at(H200)


@figure("h200_7_execution_over_model")
def h200_execution_over_model() -> str:
    b = best(H200)
    return f"{b.execution_ms / raw_ms(COMPILED, b.avg_batch_size, H200):.1f}x"


@figure("h200_7_raw_share")
def h200_raw_share() -> str:
    b = best(H200)
    model = raw_ms(COMPILED, b.avg_batch_size, H200)
    return (
        f"{model:.2f} ms of the {b.execution_ms:.2f} ms per execution "
        f"({b.execution_ms / model:.1f}x; the GPU {b.gpu0_util_pct:.0f} % busy)"
    )
