"""Live metrics (notebook 8, and the hook for notebook 6): Triton's /metrics sampled while a real
perf_analyzer run executes.

The reader (servelab.triton.triton_stats.reading, the lab's one reader of Triton's metrics) is
checked on text Triton itself wrote (a scrape of the real server), the sampler on a real run: at
least N intervals during it, inferences/s seen while the load runs and back to 0 after, queue and
compute per request from the counters, utilisation labelled with what it measured, and the figure
drawn headless.
"""

from __future__ import annotations

import math
import time

import matplotlib
import pandas as pd
import pytest
import requests
from triton_helpers import start_local_triton

from servelab import perf
from servelab.triton import gpu_names, live_metrics, triton_stats

matplotlib.use("Agg")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
MODEL = "food_classifier_onnx"
MIN_POINTS = 6


@pytest.fixture(scope="module")
def triton(built_artifacts, tmp_path_factory):
    server = start_local_triton(tmp_path_factory.mktemp("triton_metrics"), timeout=90)
    try:
        yield server
    finally:
        server.stop()


def test_parse_a_real_scrape(triton):
    scrape = triton_stats.reading(requests.get(triton.metrics_url, timeout=5).text)
    assert {"food_classifier", MODEL} <= set(scrape["models"])
    for counter in ("inferences", "requests", "queue_us", "compute_infer_us"):
        assert counter in scrape["models"][MODEL]
    assert scrape["gpus"] == {}  # the pip-installed Triton of local mode has no GPU metrics
    assert scrape["cpu"] is not None and 0.0 <= scrape["cpu"] <= 1.0


def test_interval_arithmetic():
    before = {
        "models": {
            "m": {
                "inferences": 10,
                "requests": 10,
                "queue_us": 1000,
                "compute_input_us": 0,
                "compute_infer_us": 5000,
                "compute_output_us": 0,
            }
        },
        "gpus": {},
        "cpu": 0.1,
    }
    after = {
        "models": {
            "m": {
                "inferences": 30,
                "requests": 20,
                "queue_us": 21000,
                "compute_input_us": 1000,
                "compute_infer_us": 44000,
                "compute_output_us": 0,
                "pending": 3,
            }
        },
        "gpus": {"GPU-b": 0.5, "GPU-a": 0.25},
        # the server's own CUDA indices, as its GPU instances report them: not the uuids' order
        "cuda_devices": {"GPU-b": 0, "GPU-a": 1},
        "cpu": 0.9,
    }
    row = live_metrics.interval(before, after, 2.0)
    assert row["m:infer_per_s"] == 10.0  # 20 inferences in 2 s
    assert row["m:queue_ms"] == 2.0  # 20 ms queued over 10 requests
    assert row["m:compute_ms"] == 4.0  # 40 ms computing over 10 requests
    assert row["m:pending"] == 3
    assert row["gpu0_util_pct"] == 50.0 and row["gpu1_util_pct"] == 25.0  # by index, not uuid
    assert "cpu_util_pct" not in row  # with GPUs the figure shows the GPUs
    empty = live_metrics.interval(after, after, 1.0)
    assert empty["m:infer_per_s"] == 0 and math.isnan(empty["m:queue_ms"])
    gpu_names.forget()  # the reported indices are kept per process: not for the next test


def line(triton, concurrency: int, window_ms: int) -> str:
    return (
        f"perf_analyzer -m {MODEL} -u {triton.url.split('://')[-1]} --shape input:3,224,224 "
        f"--concurrency-range {concurrency} --measurement-interval {window_ms} "
        "--stability-percentage 1000 --max-trials 3"
    )


def test_samples_during_a_real_run(triton, tmp_path):
    watch = live_metrics.Watch(triton.metrics_url, models=[MODEL], interval_s=0.4)
    start = time.monotonic()
    result = watch.during(
        lambda: perf.run_line(line(triton, 4, 1000), "c4", out=tmp_path, verbose=False),
        refresh_s=0.5,
    )
    seconds = time.monotonic() - start
    table = watch.table()
    assert len(table) >= MIN_POINTS, f"{len(table)} intervals in {seconds:.1f} s"
    busy = table[table[f"{MODEL}:infer_per_s"] > 0]
    assert len(busy) >= MIN_POINTS // 2
    # the sampled rate agrees with what perf_analyzer measured (same run, coarser windows)
    assert busy[f"{MODEL}:infer_per_s"].median() == pytest.approx(
        result.row["throughput_infer_s"], rel=0.5
    )
    assert (busy[f"{MODEL}:compute_ms"] > 0).all() and (busy[f"{MODEL}:queue_ms"] >= 0).all()
    assert "cpu_util_pct" in table and table["cpu_util_pct"].max() > 10
    assert not watch.errors
    fig = watch.last_figure
    assert len(fig.axes) == 3 and all(ax.lines for ax in fig.axes)
    fig.savefig(tmp_path / "live.png")
    assert (tmp_path / "live.png").stat().st_size > 10_000


def test_the_figure_refreshes_in_one_notebook_output(triton, tmp_path):
    """In a real Jupyter kernel (nbclient) the figure is one output, redrawn in place while the
    run goes on (update_display_data messages), not a new image per refresh."""
    import nbformat
    from nbclient import NotebookClient

    source = (
        "from pathlib import Path\n"
        "from servelab import perf\n"
        "from servelab.triton import live_metrics\n"
        f"line = {line(triton, 2, 1500)!r}\n"
        f"watch = live_metrics.Watch('{triton.metrics_url}', models=['{MODEL}'], interval_s=0.4)\n"
        f"run = lambda: perf.run_line(line, 'nb', out=Path('{tmp_path}'), verbose=False)\n"
        "watch.during(run, refresh_s=0.5)\n"
        "print(len(watch.table()))"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    client = NotebookClient(nb, timeout=120, kernel_name="python3")
    updates = []
    original = client.process_message

    def counting(msg, cell, cell_index):
        if msg["header"]["msg_type"] == "update_display_data":
            updates.append(msg["content"].get("transient", {}).get("display_id"))
        return original(msg, cell, cell_index)

    client.process_message = counting
    client.execute()
    print(f"{len(updates)} in-place redraws of one display")
    outputs = nb.cells[0].outputs
    images = [
        o
        for o in outputs
        if o.output_type in ("display_data", "execute_result") and "image/png" in o.data
    ]
    assert len(images) == 1, [o.output_type for o in outputs]
    assert len(updates) >= 2 and len(set(updates)) == 1, f"{len(updates)} redraws of {set(updates)}"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert int(printed.strip().splitlines()[-1]) >= MIN_POINTS


def test_the_one_line_hook_for_notebook_6(triton, tmp_path, monkeypatch):
    """What notebook 6's 6.3 and 6.6 cells add: the Watch finds Triton's metrics where the
    notebook's environment says (TRITON_METRICS_URL), returns the run it watched, and saves what
    it saw."""
    monkeypatch.setenv("TRITON_METRICS_URL", triton.metrics_url)
    saved = tmp_path / "live_6.3_2_inst_c8"
    run = live_metrics.Watch(models=[MODEL]).during(
        lambda: perf.run_line(line(triton, 2, 1000), "6.3 hook", out=tmp_path, verbose=False),
        save=saved,
    )
    assert isinstance(run, perf.Run) and run.row["throughput_infer_s"] > 0
    table = pd.read_csv(tmp_path / "live_6.3_2_inst_c8.csv")  # the name as given, dots and all
    assert len(table) >= MIN_POINTS // 2  # 0.5 s intervals over a run of >= 3 s
    assert (table[f"{MODEL}:infer_per_s"] > 0).any()
    assert (tmp_path / "live_6.3_2_inst_c8.png").stat().st_size > 10_000


def test_a_failed_run_is_raised_after_the_sampling_stopped(triton, tmp_path):
    watch = live_metrics.Watch(triton.metrics_url, models=[MODEL], interval_s=0.3)
    broken = f"perf_analyzer -m no_such_model -u {triton.url.split('://')[-1]}"
    with pytest.raises(perf.PerfAnalyzerError):
        watch.during(lambda: perf.run_line(broken, "broken", out=tmp_path, verbose=False))
    assert not watch.sampler._thread.is_alive()
