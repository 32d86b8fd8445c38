"""What perf_analyzer writes, read: its CSV row per load level, its measurement windows, the
requests it sent late, and what its failures mean.

Introduced in notebook 6 (perf.run_line reads every run with it).

perf_analyzer writes one CSV row per load level (-f FILE); its times are microseconds. Here they
become milliseconds with these columns:
    concurrency | request_rate, throughput_infer_s, client_send_ms, network_server_send_recv_ms,
    server_queue_ms, server_compute_input_ms, server_compute_infer_ms, server_compute_output_ms,
    client_recv_ms, p50_ms, p90_ms, p95_ms, p99_ms (+ avg_latency_ms ... with --verbose-csv)
"""

from __future__ import annotations

import io
import re

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
# an open-loop run whose client fell further behind than this is not the load it claims
DELAYED_LIMIT_PCT = 5.0
_PASS = re.compile(r"Pass \[\d+\] throughput: ([0-9.]+) infer/sec\. Avg latency: (\d+) usec")
_DELAYED = re.compile(r"([0-9.]+)% of the requests were delayed")


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


def unsettled(message: str) -> bool:
    """A failure of the windows, not of the server: they never agreed, or saw no answer in time
    (a machine too busy for the window)."""
    return "stable measurement" in message or "No valid requests" in message


def failure_hint(output: str) -> str:
    """What a failed run's output means, in a sentence to act on ('' when nothing is known)."""
    if "stable measurement" in output:
        return (
            "\nHint: the load did not settle; use a longer measurement_interval_ms, a larger "
            "stability_percentage, or request_count=N for a fixed number of requests."
        )
    if "is restricted, expecting header" in output:
        return (
            "\nHint: Triton's shared-memory API needs the node's secret: add "
            "-H lab-admin-key:$TRITON_ADMIN_KEY (gRPC: -H "
            "triton-grpc-protocol-lab-admin-key:$TRITON_ADMIN_KEY) with TRITON_ADMIN_KEY set "
            "(the lab's Jupyter has it)."
        )
    refused = ("failed to get model metadata", "Connection refused", "Couldn't connect")
    if any(words in output for words in refused):
        return (
            "\nHint: is Triton running at that address, and is the model READY "
            "(GET /v2/models/<m>/ready)?"
        )
    return ""
