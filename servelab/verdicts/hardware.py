"""Notebook 7's verdicts that read several runs at once, judged on your runs as the notebook holds
them (perf.Run objects); the steps' single-number claims are written in the notebook's verdict
cells.

Introduced in notebook 7.
"""

from __future__ import annotations

from servelab import claims


def shared_memory_sends_faster(step: str, grpc: list, shared_memory: list) -> str:
    """7.4's claim on the transports' runs (the rounds of gRPC, and of gRPC with system shared
    memory): with shared memory the client spends less time sending each request."""
    plain, shared = (
        claims.Measured.from_windows([run.row["client_send_ms"] for run in runs])
        for runs in (grpc, shared_memory)
    )
    return claims.at_least(
        f"{step}: with shared memory the client's send time per request falls ({len(grpc)} "
        "runs each, under load)",
        plain / shared,
        1.0,
    )
