"""Faults of Triton's processes that its watchdog must converge from (issue 35), on the stack `make
up` starts (the launcher CLI, its own state folder and model repository), with the ensemble of
notebook 8 loaded, so that "serving" means raw image bytes -> preprocess -> food_classifier_onnx:

- a stub killed right after the watchdog repaired its model (the second of two kills);
- a stub killed while Triton loads its model (Triton 2.51 then never finishes the load);
- a stub stopped (SIGSTOP): Triton answers 500 at once for as long as it is stopped;
- the watchdog itself killed: `make status` must say so, `make up` must start it again;
- whose command lines hold Triton's admin key.

While each fault lasts, `make status` runs again and again beside a probe of the ensemble: a
sample where status said "healthy" between two failed probes is a lie. Each scenario returns one
row (reliability.faults.scenario): what was expected, what happened, passed or not.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import requests

from labstack import launcher
from maintainers.reliability.faults import _launcher, _state, _stubs, lab_processes, scenario
from servelab import ensemble, labenv

SERVING_AGAIN_GOAL_S = 60.0  # the "done when", from the fault to the ensemble serving
REPAIRED_GOAL_S = 30.0  # the goal once the fault has stopped


def _serves(url: str, image: bytes) -> bool:
    try:
        return ensemble.infer_bytes([image], url).shape == (1, 11)
    except Exception:  # noqa: BLE001 - any failure is "not serving"
        return False


def _status_word(out: str) -> str:
    line = next((ln for ln in out.splitlines() if ln.strip().startswith("triton ")), "")
    words = line.split()
    return words[3] if len(words) > 3 else "?"


class _Watch:
    """`make status` in a loop, each sample between two probes of the ensemble, until stopped;
    and the first time the ensemble serves again after .start()."""

    def __init__(self, cli, url: str, image: bytes):
        self.cli, self.url, self.image = cli, url, image
        self.samples: list[tuple[bool, str, bool, str]] = []  # (before, word, after, lines)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            before = _serves(self.url, self.image)
            out = self.cli("status", timeout=60).stdout
            after = _serves(self.url, self.image)
            lines = " | ".join(ln.strip() for ln in out.splitlines() if ln.startswith("   "))
            self.samples.append((before, _status_word(out), after, lines))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=120)

    def until_serving(self, limit_s: float) -> float | None:
        start = time.monotonic()
        while time.monotonic() - start < limit_s:
            if _serves(self.url, self.image):
                return time.monotonic() - start
            time.sleep(0.25)
        return None

    def verdict(self) -> tuple[bool, str]:
        """(no sample lied, a summary): a lie is 'healthy' between two failed probes."""
        lies = [s for s in self.samples if not s[0] and not s[2] and s[1] == "healthy"]
        down = [s for s in self.samples if not s[0] and not s[2]]
        said = next((s[3] for s in down), "")
        text = (
            f"`make status` {len(self.samples)} times: while the ensemble failed "
            f"({len(down)} samples) it said {sorted({s[1] for s in down}) or '-'}"
            + (f", e.g. {said[:240]!r}" if said else "")
            + (f"; said healthy during the outage {len(lies)} time(s): NO" if lies else "")
        )
        return not lies, text


def _model_stubs(state_dir: Path, model: str) -> list[int]:
    return [p for p, m in _stubs(state_dir).items() if m == model and _running(p)]


def _events(state_dir: Path) -> list[str]:
    try:
        return json.loads((state_dir / "triton_health.json").read_text()).get("events", [])
    except (OSError, ValueError):
        return []


def _one_stub(state_dir: Path, model: str) -> list[int]:
    """The model's one stub, once it has had exactly one for 2 s (a load that replaces stubs is
    over)."""
    seen: list[list[int]] = []

    def settled():
        seen.append(_model_stubs(state_dir, model))
        recent = seen[-20:]
        return recent[0] if len(recent) == 20 and all(r == recent[0] for r in recent) else None

    found = _wait_for(lambda: (s := settled()) and len(s) == 1 and s, 60, 0.1)
    if not found:
        raise RuntimeError(f"{model} did not settle to one running stub: {seen[-1:]}")
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "T", "t")


def _wait_for(test, limit_s: float, every: float = 0.02):
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        found = test()
        if found:
            return found
        time.sleep(every)
    return None


def _healthy_again(cli, limit_s: float = 120.0) -> bool:
    return bool(_wait_for(lambda: _status_word(cli("status").stdout) == "healthy", limit_s, 1.0))


def _report_line(took, goal) -> str:
    return "serving again after " + (
        f"{took:.1f} s (goal {goal:.0f} s)" if took is not None else f"more than {goal:.0f} s: NO"
    )


def stub_killed_after_repair(cli, state_dir, url, image, model="food_classifier_onnx") -> dict:
    def run():
        first = _one_stub(state_dir, model)
        os.kill(first[0], signal.SIGKILL)
        # the repair, as the watchdog reports it done; then kill the new stub at once
        done = f"{model}: stub [{first[0]}] died, model loaded again"
        repaired = _wait_for(lambda: any(done in e for e in _events(state_dir)), 60)
        new = [p for p in _model_stubs(state_dir, model) if p not in first]
        if not new or not repaired:
            return False, f"no repair of the first kill within 60 s (new stub {new})"
        with _Watch(cli, url, image) as watch:
            os.kill(new[0], signal.SIGKILL)
            took = watch.until_serving(SERVING_AGAIN_GOAL_S)
            time.sleep(2.0)
        truthful, said = watch.verdict()
        return took is not None and truthful, (
            f"stub [{first[0]}] killed, repaired (stub [{new[0]}]), killed again as its model was "
            f"ready: {_report_line(took, SERVING_AGAIN_GOAL_S)}; {said}"
        )

    return scenario(
        f"Triton: a stub of {model} killed right after its repair",
        f"the ensemble serves again within {SERVING_AGAIN_GOAL_S:.0f} s; `make status` never says "
        "healthy while it does not",
        run,
    )


def stub_killed_while_loading(cli, state_dir, url, image, model="food_classifier_onnx") -> dict:
    def run():
        first = _one_stub(state_dir, model)
        os.kill(first[0], signal.SIGKILL)
        # the watchdog unloads and loads the model: kill the new stub while Triton loads it
        new = _wait_for(lambda: [p for p in _model_stubs(state_dir, model) if p not in first], 60)
        if not new:
            return False, "no new stub within 60 s of the first kill"
        loading = not _ok(f"{url}/v2/models/{model}/ready")
        with _Watch(cli, url, image) as watch:
            os.kill(new[0], signal.SIGKILL)
            took = watch.until_serving(SERVING_AGAIN_GOAL_S)
            time.sleep(2.0)
        truthful, said = watch.verdict()
        return took is not None and truthful and loading, (
            f"stub [{new[0]}] killed while {model} was "
            f"{'loading' if loading else 'READY (too late: NO)'}: "
            f"{_report_line(took, SERVING_AGAIN_GOAL_S)}; {said}"
        )

    return scenario(
        f"Triton: a stub of {model} killed while Triton loads the model",
        f"the ensemble serves again within {SERVING_AGAIN_GOAL_S:.0f} s (the watchdog restarts "
        "the wedged server); `make status` never says healthy while it does not",
        run,
    )


def stub_stopped(cli, state_dir, url, image, model="food_classifier_onnx", hold_s=30.0) -> dict:
    def run():
        victim = _one_stub(state_dir, model)[0]
        with _Watch(cli, url, image) as watch:
            os.kill(victim, signal.SIGSTOP)
            time.sleep(1.0)
            failing = not _serves(url, image)
            took = watch.until_serving(REPAIRED_GOAL_S)
            time.sleep(max(0.0, hold_s - (took or 0)))
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGCONT)  # the fault stops (if the stub is still there)
        after = _wait_for(lambda: _serves(url, image), REPAIRED_GOAL_S, 0.5)
        truthful, said = watch.verdict()
        return bool(failing and took is not None and truthful and after), (
            f"stub [{victim}] stopped: the ensemble failing at once: {'yes' if failing else 'NO'}"
            f"; {_report_line(took, REPAIRED_GOAL_S)} while still stopped; serving after SIGCONT:"
            f" {'yes' if after else 'NO'}; {said}"
        )

    return scenario(
        f"Triton: a stub of {model} stopped (SIGSTOP) for {hold_s:.0f} s",
        f"the ensemble serves again within {REPAIRED_GOAL_S:.0f} s, and after the stub continues; "
        "`make status` never says healthy while it does not",
        run,
    )


def watchdog_killed(cli, state_dir, url, image) -> dict:
    def run():
        old = _state(state_dir)["triton"]
        os.kill(old["pid"], signal.SIGKILL)
        time.sleep(1.0)
        status = cli("status").stdout
        line = next((ln for ln in status.splitlines() if "its watchdog" in ln), "")
        serving = _serves(url, image)
        again = cli("up")
        new = _state(state_dir).get("triton", {})
        servers = [p for p in lab_processes(state_dir) if _is_tritonserver(p)]
        back = _wait_for(lambda: _serves(url, image), 60, 0.5)
        ok = (
            serving
            and _status_word(status) == "DEGRADED"
            and "not running" in line
            and again.returncode == 0
            and new.get("pid") != old["pid"]
            and new.get("port") == old["port"]
            and len(servers) == 1
            and back
        )
        return ok, (
            f"watchdog SIGKILLed; tritonserver serving meanwhile: {'yes' if serving else 'NO'}; "
            f"`make status`: {_status_word(status)} ({line.strip()[:150]!r}); `make up`: exit "
            f"{again.returncode}, a new watchdog: {'yes' if new.get('pid') != old['pid'] else 'NO'}"
            f", same port: {'yes' if new.get('port') == old['port'] else 'NO'}, tritonservers "
            f"running after it: {len(servers)}; the ensemble serving: {'yes' if back else 'NO'}"
        )

    return scenario(
        "Triton: its watchdog killed",
        "`make status` says the watchdog is not running (DEGRADED, with the command that "
        "recovers it); `make up` starts Triton and its watchdog again on the same ports",
        run,
    )


def _is_tritonserver(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "tritonserver"
    except OSError:
        return False


def _ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.RequestException:
        return False


def key_on_command_lines(state_dir: Path, key: str) -> dict:
    """Which running processes of the stack hold Triton's admin key on their command line, or in
    their environment but the watchdog (the one that needs it there)."""

    def run():
        shown, kept, watchdogs = [], [], 0
        for pid in lab_processes(state_dir):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes()
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            watchdog = b"servelab.serving.triton_watchdog" in argv
            watchdogs += watchdog and key.encode() in environ
            shown += [comm] if key.encode() in argv else []
            kept += [comm] if key.encode() in environ and not watchdog else []
        return bool(key) and watchdogs == 1 and not shown and not kept, (
            f"processes whose command line holds the key: {shown or 'none'} (tritonserver reads "
            "it from its command line only: the watchdog puts it there, and overwrites it with a "
            "random mask once the server has read it); whose environment holds it, the "
            f"watchdog's aside: {kept or 'none'} (tritonserver and its stubs start without it)"
        )

    return scenario(
        "Triton's admin key on command lines and in environments",
        "on no command line; in the watchdog's environment alone",
        run,
    )


def load_ensemble(url: str, repo: Path) -> None:
    """Place notebook 8's ensemble and its preprocess step in the repository and load them."""
    ensemble.place(repo, mode="local", kind="cpu", verbose=False)
    headers = labenv.admin_headers()
    for model in ("preprocess", ensemble.ENSEMBLE):
        resp = requests.post(
            f"{url}/v2/repository/models/{model}/load", headers=headers, json={}, timeout=300
        )
        resp.raise_for_status()


def watchdog_faults(tmp: Path, image: bytes) -> list[dict]:
    """The scenarios above on one stack (`up`), each starting from a healthy one; then `down`."""
    state_dir, repo = tmp / "watchdog-faults", tmp / "model_repository"
    cli = _launcher(state_dir, repo)
    rows = []
    try:
        first = cli("up")
        if first.returncode != 0:
            return [scenario("Triton's watchdog", "", lambda: (False, first.stderr[-300:]))]
        url = launcher.service_url(_state(state_dir)["triton"]["port"])
        key = dict(
            line.split("=", 1)
            for line in (state_dir / "secrets.env").read_text().splitlines()
            if "=" in line
        )["TRITON_ADMIN_KEY"]
        os.environ["TRITON_ADMIN_KEY"] = key  # labenv.admin_headers() sends it
        load_ensemble(url, repo)
        rows.append(key_on_command_lines(state_dir, key))
        for fault in (stub_killed_after_repair, stub_killed_while_loading, stub_stopped):
            _healthy_again(cli)
            rows.append(fault(cli, state_dir, url, image))
        _healthy_again(cli)
        rows.append(watchdog_killed(cli, state_dir, url, image))
        return rows
    finally:
        cli("down")
        for pid in lab_processes(state_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
