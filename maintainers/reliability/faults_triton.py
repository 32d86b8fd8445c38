"""Faults of Triton (one running server, local mode): configs Triton refuses while a model is loaded
(through the reload helper servelab.triton.triton_config, a hand-broken config.pbtxt, the
repository API), and tritonserver killed in the middle of a perf_analyzer run. The kill ends the
server: run it last."""

from __future__ import annotations

import json
from pathlib import Path

import requests

from maintainers.reliability.faults import kill_during, scenario
from maintainers.reliability.fuzz_triton import answers_good_request, error_of
from servelab import labenv

MODEL = "food_classifier_onnx"


def _log_reason(triton, since: int) -> str:
    """Triton's detailed reason for a failed load, from its log (written after byte offset `since`):
    the HTTP answer to a broken config.pbtxt only says 'failed to poll from model repository'."""
    try:
        with open(triton.record["log"], "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [
        ln
        for ln in text.splitlines()
        if MODEL in ln and ("Poll failed" in ln or "failed to load" in ln)
    ]
    return lines[-1].split("] ", 1)[-1].strip('"')[:240] if lines else ""


def _log_size(triton) -> int:
    try:
        return Path(triton.record["log"]).stat().st_size
    except OSError:
        return 0


def broken_configs(triton, good_b64: str) -> list[dict]:
    from servelab.triton import triton_config

    path = Path(triton.repo) / MODEL / "config.pbtxt"

    def serving() -> bool:
        return triton_config.model_ready(MODEL, triton.url) and answers_good_request(
            triton.url, MODEL, good_b64
        )

    def via_reload_helper():
        """What a student's notebook cell does: edit() writes the file and asks for a reload."""
        original = path.read_text()
        since = _log_size(triton)
        result = triton_config.edit(
            MODEL,
            "dynamic_batching { preferred_batch_size: [ 32 ] }",
            repo=triton.repo,
            url=triton.url,
            verbose=False,
        )  # max_batch_size is 16: Triton refuses the config
        on = serving()
        restored = path.read_text() == original
        reason = _log_reason(triton, since)
        ok = not result.ok and bool(result.error) and result.still_serving and on and restored
        return ok, (
            f"edit: ok={result.ok}, error: {result.error[:200]!r}"
            + (f"; Triton's log: {reason!r}" if reason else "")
            + f"; previous version still serving: {'yes' if on else 'NO'}"
            + "; previous config.pbtxt put back: "
            f"{'yes' if restored else 'NO'}"
        )

    def via_file():
        """A hand-edited config.pbtxt that is not valid text protobuf, then a load through the
        helper."""
        original = path.read_text()
        since = _log_size(triton)
        try:
            path.write_text(original.replace("max_batch_size", "max_batch_sizzle", 1))
            loaded, _, message = triton_config.load_model(MODEL, triton.url, timeout=300)
            on = serving()
        finally:
            path.write_text(original)
        reason = _log_reason(triton, since)
        fixed = triton_config.load_model(MODEL, triton.url, timeout=300)[0] and serving()
        ok = not loaded and bool(message) and on and fixed
        return ok, (
            f"load_model: {message[:200]!r}"
            + (f"; Triton's log: {reason!r}" if reason else "")
            + f"; previous version still serving: {'yes' if on else 'NO'}"
            + "; the fixed file loads again: "
            f"{'yes' if fixed else 'NO'}"
        )

    def via_api():
        """A config override through the repository API naming a backend that is not installed."""
        config = {**triton_config.served_config(MODEL, triton.url), "backend": "no_such_backend"}
        resp = requests.post(
            f"{triton.url}/v2/repository/models/{MODEL}/load",
            json={"parameters": {"config": json.dumps(config)}},
            headers=labenv.admin_headers(),
            timeout=300,
        )
        on = serving()
        message = error_of(resp)
        ok = resp.status_code != 200 and "no_such_backend" in message and on
        return (
            ok,
            f"HTTP {resp.status_code} {message[:260]!r}; previous version still serving: "
            f"{'yes' if on else 'NO'}",
        )

    expected = "Triton's own message reported; the loaded version keeps serving"
    return [
        scenario(
            f"Triton: reload helper writes a config Triton refuses ({MODEL}, preferred batch 32 > "
            "max 16)",
            expected + "; the previous config.pbtxt is put back",
            via_reload_helper,
        ),
        scenario(
            f"Triton: broken config.pbtxt (not valid text protobuf), then load ({MODEL})",
            expected + "; the fixed file loads again",
            via_file,
        ),
        scenario(
            f"Triton: repository API load with a config naming a missing backend ({MODEL})",
            expected,
            via_api,
        ),
    ]


def killed_mid_benchmark(triton, workdir: Path, kill_after_s: float = 3.0) -> dict:
    """servelab.perf.run_line (notebook 6's perf_analyzer helper, its default timeout) against
    Triton; SIGKILL tritonserver and its stubs after kill_after_s: PerfAnalyzerError with
    perf_analyzer's words."""

    def run():
        from servelab import perf

        host = triton.url.split("://")[-1]
        # windows, not a request count: this run must still be going when the server is killed (it
        # cannot end before three 2 s windows, however idle the machine), and it never has to settle
        line = (
            f"perf_analyzer -m {MODEL} -u {host} --concurrency-range 2 --measurement-interval 2000"
        )

        def benchmark() -> tuple[str, str]:
            try:
                perf.run_line(line, "killed", out=Path(workdir), verbose=False)
                return "finished without error", ""
            except perf.PerfAnalyzerError as exc:
                return "PerfAnalyzerError", str(exc)

        (outcome, message), took = kill_during(triton, kill_after_s, benchmark)
        lines = [ln.strip() for ln in message.splitlines()[1:] if ln.strip()]
        first = next(
            (ln for ln in lines if "rror" in ln or "ailed" in ln or "refused" in ln),
            lines[0] if lines else "",
        )
        ok = outcome == "PerfAnalyzerError" and took < 90 and not triton.alive()
        return ok, f"{outcome} after {took:.1f} s: {first[:160]}"

    return scenario(
        "tritonserver killed mid-benchmark (servelab.perf / perf_analyzer)",
        "PerfAnalyzerError with perf_analyzer's message, well within the helper's timeout",
        run,
    )
