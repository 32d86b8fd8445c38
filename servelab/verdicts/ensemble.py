"""Notebook 8's verdicts: the claims of 8.2 and 8.4 judged on your runs, handed over as the
notebook holds them (perf.Run objects from ensemble.measure), your predictions beside them; the
notebook names the step (`step`), whose number heads each claim.

Introduced in notebook 8.
"""

from __future__ import annotations

from servelab import claims
from servelab.claims import Prediction


def three_paths(
    step: str,
    ensemble,
    python,
    client_onnx,
    offered,
    rate: float,
    over_python: Prediction,
    over_client: Prediction,
) -> None:
    """8.2: the ensemble against the Python-backend model and the client path (their closed-loop
    runs, your predictions beside them), and at the offered rate (the ensemble's run `offered`):
    the ensemble keeps it, the Python model cannot."""
    ens, py, onnx = (run.throughput for run in (ensemble, python, client_onnx))
    claims.compare_prediction(over_python, ens / py)
    claims.compare_prediction(over_client, ens / onnx)
    claims.at_least(
        f"{step}: the ensemble serves more than the Python model that decodes and runs PyTorch",
        ens / py,
        1.0,
    )
    claims.at_least(
        f"{step}: at {rate} requests/s the ensemble keeps the offered rate (>= 95%)",
        offered.throughput / rate,
        0.95,
        {"sent late %": offered.row["delayed_pct"]},
    )
    claims.at_least(
        f"{step}: {rate} requests/s is more than the Python model can serve (U = rate x "
        "service time > 1: its queue only grows)",
        claims.Measured.exact(rate) / py,
        1.0,
    )


def a_second_decoder(step: str, one, two, slow: str, predicted: Prediction) -> None:
    """8.4: two preprocess instances (run `two`) against one (`one`), your prediction beside the
    gain; preprocess's own queue judged only where it queued for a good part of its own work (a
    queue of a millisecond or two moves with anything else the cores do); where the requests
    still wait, by `slow`, the step with the longer queue in 8.3."""
    gain = two.throughput / one.throughput
    claims.compare_prediction(predicted, gain)
    shorter = f"{step}: a second preprocess instance shortens preprocess's own queue"
    queued, work = one.row["preprocess_queue_ms"], one.row["preprocess_compute_ms"]
    if queued >= 0.25 * work:
        ratio = two.measured("preprocess_queue_ms") / one.measured("preprocess_queue_ms")
        claims.at_most(shorter, ratio, 1.0)
    else:
        claims.not_checkable(
            shorter,
            f"preprocess hardly queued with one instance ({queued} ms against {work} ms of its "
            "own work)",
        )
    if slow != "food_classifier_onnx":
        claims.at_least(
            f"{step}: requests waited for decoding: a second decoder serves more", gain, 1
        )
        return
    claims.at_least(
        f"{step}: with two decoders the requests still wait at the classifier (its queue "
        "stays longer than preprocess's)",
        two.measured("food_classifier_onnx_queue_ms") / two.measured("preprocess_queue_ms"),
        1.0,
        note="throughput moves with whatever else the cores do; the queues say where",
    )
