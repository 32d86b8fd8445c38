"""docs/reliability.md from the results of one run (__main__.run_all): numbers only, no judgement
that the tables do not show."""

from __future__ import annotations

import os

from maintainers.reliability.common import FLAGGED, RSS_GROWTH_LIMIT_MIB, TRITON_CORE_500, VERDICTS
from maintainers.reliability.corpus import image_corpus


def table(rows: list[list], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += [
        "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |"
        for row in rows
    ]
    return "\n".join(lines)


def problems(res: dict) -> list[str]:
    """What breaks the contract; the command exits 1 if anything does (Triton core 500s are not
    ours)."""
    out = []
    for t in res.get("fuzz", []):
        for v in ("server error", "no answer", "crash", "unclear"):
            if t.counts[v]:
                out.append(f"{t.target}: {t.counts[v]} {v}")
        if not t.still_serving:
            out.append(f"{t.target}: not serving after the fuzz run")
    for s in res.get("soak", []):
        if s["errors"] or s["rss_growth_mib"] > RSS_GROWTH_LIMIT_MIB:
            out.append(
                f"soak {s['target']}: {s['errors']} failed, RSS growth {s['rss_growth_mib']} MiB"
            )
    out += [f"fault: {f['scenario']}" for f in res.get("faults", []) if not f["passed"]]
    out += [f"hostile client: {h['check']}" for h in res.get("hostile", []) if not h["ok"]]
    out += [f"safe default: {c}" for c, ok, _ in res.get("safe", []) if not ok]
    out += [f"stack: {r['check']}" for r in res.get("stack", []) if not r["ok"]]
    return out


def _summary(res: dict) -> list[list]:
    rows = []
    fuzz, soaks, faults = res.get("fuzz", []), res.get("soak", []), res.get("faults", [])
    if fuzz:
        ours = [t for t in fuzz if not t.target.startswith("Triton")]
        rows += [
            [
                "fuzz cases, per target",
                ", ".join(f"{t.target.split(' (')[0]} {t.cases}" for t in fuzz),
            ],
            [
                "server errors (5xx) / crashes / unanswered, all targets",
                " / ".join(
                    str(sum(t.counts[v] for t in fuzz))
                    for v in ("server error", "crash", "no answer")
                ),
            ],
            [
                "4xx whose message was missing or did not say what is wrong",
                sum(t.counts["unclear"] for t in fuzz),
            ],
            [
                "Triton core HTTP 500 on malformed JSON (Triton's own parser, not the lab's code; "
                "see below)",
                sum(t.counts[TRITON_CORE_500] for t in fuzz),
            ],
            [
                "targets answering a good request after their fuzz run",
                f"{sum(bool(t.still_serving) for t in fuzz)} of {len(fuzz)}",
            ],
            [
                "our services (FastAPI, Flask, decoding): 5xx / crashes",
                " / ".join(str(sum(t.counts[v] for t in ours)) for v in ("server error", "crash")),
            ],
        ]
    if soaks:
        rows += [
            [
                "soak: requests / failed",
                f"{sum(s['requests'] for s in soaks)} / {sum(s['errors'] for s in soaks)}",
            ],
            [
                "soak: largest resident-memory growth",
                f"{max(s['rss_growth_mib'] for s in soaks)} MiB (limit {RSS_GROWTH_LIMIT_MIB:.0f} "
                "MiB)",
            ],
        ]
    if faults:
        rows.append(
            ["fault scenarios passed", f"{sum(f['passed'] for f in faults)} of {len(faults)}"]
        )
    if res.get("hostile"):
        rows.append(
            [
                "hostile-client checks within their bound",
                f"{sum(h['ok'] for h in res['hostile'])} of {len(res['hostile'])}",
            ]
        )
    if res.get("stack"):
        rows.append(
            [
                "`make up RAY=1` stack: checks within their bound",
                f"{sum(r['ok'] for r in res['stack'])} of {len(res['stack'])}",
            ]
        )
    if res.get("safe"):
        rows.append(
            [
                "safe-default checks passed",
                f"{sum(ok for _, ok, _ in res['safe'])} of {len(res['safe'])}",
            ]
        )
    return rows


def _fuzz(res: dict) -> list[str]:
    fuzz = res["fuzz"]
    parts = [
        "## 1. Bad input, generated",
        "",
        "FastAPI (both runtimes): schemathesis generates positive and negative bodies from each "
        "service's own `/openapi.json` and checks every answer against it (no 5xx, documented "
        "status, content type and schema, negative data refused); then the image corpus below as "
        "base64, bodies the schema cannot describe (non-JSON, deep nesting, lone surrogates, 12 "
        "MiB, a lying Content-Length) and Hypothesis-mutated images (random bytes; small "
        "JPEG/PNG/GIF/WebP truncated, bit-flipped, spliced, with overwritten size fields). Flask: "
        "wrong types, empty, oversized and odd filenames, the same corpus as uploads and mutated "
        "uploads. Triton, both models: wrong datatype, wrong shape, empty string, batch larger "
        "than max_batch_size, malformed requests, then Hypothesis-generated request headers "
        "(random input name, datatype, shape and data). Shared decoding: the corpus, generated "
        "bytes and base64 text straight into `servelab.food11`. A case is 'rejected' only if the "
        "4xx message contains the words expected for it (corpus: e.g. 'pixels' for a bomb).",
        "",
        table(
            [
                [
                    t.target,
                    t.cases,
                    *[t.counts[v] for v in VERDICTS],
                    {True: "yes", False: "NO", None: "-"}[t.still_serving],
                    f"{t.seconds:.0f}",
                ]
                for t in fuzz
            ],
            ["target", "cases", *VERDICTS, "serves after", "s"],
        ),
        "",
        "Status codes seen: "
        + "; ".join(
            f"{t.target.split(' (')[0]}: "
            + ", ".join(
                f"{k}\u00d7{v}" for k, v in sorted((str(k), v) for k, v in t.statuses.items())
            )
            for t in fuzz
        )
        + ".",
        "",
    ]
    flagged = [
        (t.target, v, c, d)
        for t in fuzz
        for v in FLAGGED
        if v != TRITON_CORE_500
        for c, d in t.examples.get(v, [])
    ]
    parts += (
        [
            "Cases flagged (first five of each kind per target):",
            "",
            table([list(r) for r in flagged], ["target", "verdict", "case", "answer"]),
            "",
        ]
        if flagged
        else ["No case of any target was flagged unclear, server error, no answer or crash.", ""]
    )
    total = sum(t.counts[TRITON_CORE_500] for t in fuzz)
    reasons = [
        (t.target, detail, n)
        for t in fuzz
        for (v, detail), n in t.reasons.most_common()
        if v == TRITON_CORE_500
    ]
    hand_made = [
        f"{t.target.split()[-1]}: {c}"
        for t in fuzz
        for c, _ in t.examples.get(TRITON_CORE_500, [])
        if not c.startswith("generated")
    ]
    parts += ["### Triton core HTTP 500 on malformed JSON", ""]
    if total:
        parts += [
            f"{total} Triton requests got **HTTP 500** (not 400): every one an answer of Triton's "
            "HTTP frontend that could not parse the JSON of the inference request (its messages, "
            "all starting 'Unable to parse', are in the table below). The message says what is "
            "wrong and comes from Triton's own request parsing, before any model runs, so the "
            "lab's code is not involved: Triton gives these parse errors its INTERNAL error code, "
            "which its HTTP frontend (`src/http_server.cc`) maps to 500. They are counted in "
            "their own column above, not as server errors or crashes of the lab's services; after "
            "them the same server answered a good request for both models ('serves after'). A "
            "client should read such a 500 from Triton as 'my request body is malformed', not as "
            "'the server is broken'."
            + (f" Hand-made cases among them: {'; '.join(hand_made)}." if hand_made else ""),
            "",
            table([[a, d, n] for a, d, n in reasons], ["target", "Triton's answer", "cases"]),
            "",
        ]
    else:
        parts += ["None in this run.", ""]
    parts += [
        "Image corpus (the same files through decoding, FastAPI and Flask):",
        "",
        ", ".join(name for name, *_ in image_corpus()) + ".",
        "",
    ]
    for model, msgs in res.get("triton_messages", {}).items():
        parts += [
            f"Triton's answers to the hand-made cases, {model}:",
            "",
            table([[n, str(m)[:170]] for n, m in msgs.items()], ["case", "answer"]),
            "",
        ]
    return parts


def _soak(res: dict) -> list[str]:
    soaks = res["soak"]
    return [
        "## 2. Bounded soak",
        "",
        f"{res['concurrency']} concurrent clients per service for {res['soak_seconds']:.0f} s "
        "(after a 2 s warm-up at the same load), each request with a 30 s timeout and counted as "
        f"failed unless it returned a Food-11 class; one Food-11 test image ({res['image']}). "
        "Memory: resident set (VmRSS) summed over the server's process tree (uvicorn; waitress; "
        "tritonserver + its Python-backend stubs) right before and 0.5 s after the load; allowed "
        f"growth {RSS_GROWTH_LIMIT_MIB:.0f} MiB. Both Triton models run in one server, so its two "
        "rows measure the same process tree.",
        "",
        table(
            [
                [
                    s["target"],
                    s["seconds"],
                    s["concurrency"],
                    s["requests"],
                    s["errors"],
                    s["throughput_rps"],
                    s["p50_ms"],
                    s["p95_ms"],
                    s["p99_ms"],
                    s["max_ms"],
                    s["processes"],
                    s["rss_before_mib"],
                    s["rss_after_mib"],
                    s["rss_growth_mib"],
                ]
                for s in soaks
            ],
            [
                "service",
                "s",
                "clients",
                "requests",
                "failed",
                "req/s",
                "p50 ms",
                "p95 ms",
                "p99 ms",
                "max ms",
                "procs",
                "RSS before MiB",
                "RSS after MiB",
                "growth MiB",
            ],
        ),
        "",
        "Longer: `make soak SOAK_SECONDS=300` (the same code, soak only, written to "
        "results/reliability_soak.md).",
        "",
    ]


def _checks(rows: list[dict]) -> str:
    """A table of check rows: check, status, what was measured, bound, ok."""
    measured = []
    for h in rows:
        detail = ", ".join(
            f"{k.replace('_', ' ')} {v}"
            for k, v in h.items()
            if k not in ("check", "status", "bound", "ok", "detail")
        )
        if h.get("detail"):
            detail = (detail + "; " if detail else "") + f"answer: {h['detail']}"
        measured.append([h["check"], h["status"], detail, h["bound"], "yes" if h["ok"] else "NO"])
    return table(measured, ["check", "status", "measured", "bound", "ok"])


def _hostile(rows: list[dict]) -> list[str]:
    return [
        "## 4. Hostile clients",
        "",
        "What an attacker on the network could try, bounded in count and time "
        "(maintainers/reliability/hostile.py): connections that never finish their request (Flask, "
        "served by waitress), a chunked body far over the limit, request headers that never end "
        "(uvicorn and waitress), small PNG files declaring a 40 Mpx canvas, whole or truncated, "
        "sent together to FastAPI onnx and to Flask (resident memory of the process tree before, "
        "at the peak and 5 s after); what decoding costs (maintainers/reliability/decode_cost.py): "
        "two progressive JPEGs of 5,000 scans each sent at once to Flask and to FastAPI (refused, "
        "and health timed meanwhile), eight legitimate 40 Mpx progressive JPEGs at once to "
        "FastAPI, issue 52's D3 and its variants (a reserved marker hiding 2,172 scans from the "
        "structure walk) from four clients, first alone (the service's CPU per file, its decode "
        "workers included) then back to back while 20 large photos are uploaded (every one "
        "served?), and every Flask upload slot held by a model server that never answers. "
        "Then Triton, run under the lab's watchdog as `make up` runs it: "
        "every API that changes its state or memory (model repository, which can load a "
        "model.py, i.e. run code; system and CUDA shared memory; logging; trace) over HTTP and "
        "gRPC, without the node's secret, with a wrong one and with it; the shared-memory attack "
        "that made tritonserver segfault (a Python-backend stub's own /dev/shm region registered "
        "as an output region); and one INPUT_IMAGE element of 128 MiB, twice (Triton 2.51 has no "
        "size limit to set: the model refuses it, and the watchdog, its region limit lowered to "
        "64 MiB for this run from 512, gives the stub's region back, each time). Triton also "
        "inflates gzip request "
        "bodies without a limit of its own; it is therefore never published beyond 127.0.0.1 "
        "(docs/security.md).",
        "",
        _checks(rows),
        "",
    ]


def _stack(rows: list[dict]) -> list[str]:
    return [
        "## 6. The local stack as `make up RAY=1` starts it",
        "",
        "The round's cases (issue 43, maintainers/reliability/stack_round.py) against the stack "
        "`make up RAY=1` starts (FastAPI, Triton under its watchdog with every model, Flask, the "
        "two Ray nodes, JupyterLab; a state folder and a model repository of its own), as an "
        "attacker on the node would: every socket each service's processes listen on (the kernel's "
        "tables); Ray without its token (a job posted to the dashboard's job API, a driver, a "
        "Ray Client ping) and, with it, what a task, an actor and a job see of the environment "
        "while the driver's holds the lab's secrets; crafted files uploaded to Flask and to "
        "FastAPI (each service's CPU time for the file, from /proc, and Flask's /healthz timed "
        "every 0.2 s meanwhile), D3 among them; the two requests that crash Triton 2.51 sent "
        "straight to it "
        f"{sum(r['check'].startswith('Triton: crashing') for r in rows)} times in a row (its "
        "watchdog's report read meanwhile; after each, the watchdog loads again what served, "
        "each model serving as soon as it is loaded); the admin key's residual on command "
        "lines; FastAPI killed behind Flask (its /healthz 503, `make status` DEGRADED), then "
        "`make up RAY=1` again.",
        "",
        _checks(rows),
        "",
    ]


def render(res: dict, command: str) -> str:
    parts = [
        "# Reliability and safety of the lab's services, measured",
        "",
        f"Generated by `{command}` (maintainers/reliability/) in {res['seconds']:.0f} s on "
        f"{os.cpu_count()} CPU cores; do not edit by hand."
        + (
            " Every service ran as a real process on a free 127.0.0.1 port, started by the "
            "launcher's own `start()`"
            + (
                f"; Triton {res['triton_version']} (local mode, CPU) served a fresh temporary "
                "model repository, where food_classifier_onnx is the Python-backend stand-in "
                "running the same model.onnx with ONNX Runtime (the pip-installed server has no "
                "onnxruntime backend)"
                if res.get("triton_version")
                else ""
            )
            + "."
            if res.get("fuzz") or res.get("soak") or res.get("faults")
            else ""
        )
        + (
            f" Fuzz seed {res['seed']}, {res['examples']} generated examples per schemathesis mode."
            if res.get("fuzz")
            else ""
        ),
        "",
        "## Summary",
        "",
        table(_summary(res), ["", ""]),
        "",
    ]
    if res.get("fuzz"):
        parts += _fuzz(res)
    if res.get("soak"):
        parts += _soak(res)
    if res.get("faults"):
        parts += [
            "## 3. Faults",
            "",
            "The launcher scenarios run the CLI that `make up` / `make down` call, with their own "
            "state folder and model repository. The Triton process scenarios kill the processes of "
            "the stack `make up` starts (tritonserver under its watchdog), as an OOM kill or a "
            "crash would, and time the model until it answers an inference again while `make "
            "status` runs beside it. The watchdog scenarios "
            "(maintainers/reliability/faults_watchdog.py, notebook 8's ensemble loaded) kill a "
            "stub right after its repair and while Triton loads its model, stop one with SIGSTOP "
            "and kill the watchdog itself, and count the times `make status` said healthy while "
            "the ensemble failed.",
            "",
            table(
                [
                    [
                        f["scenario"],
                        f["expected"],
                        f["observed"],
                        "pass" if f["passed"] else "FAIL",
                        f["seconds"],
                    ]
                    for f in res["faults"]
                ],
                ["scenario", "expected", "what happened", "result", "s"],
            ),
            "",
        ]
    if res.get("hostile"):
        parts += _hostile(res["hostile"])
    if res.get("safe"):
        parts += [
            "## 5. Safe defaults",
            "",
            table(
                [[c, "yes" if ok else "NO", d] for c, ok, d in res["safe"]],
                ["check", "ok", "detail"],
            ),
            "",
        ]
        if res.get("binds"):
            parts += [
                "Listening addresses of the services started for this report (from /proc/net/tcp):",
                "",
                table(
                    [[n, p, ", ".join(a) or "?"] for n, p, a in res["binds"]],
                    ["service", "port", "listens on"],
                ),
                "",
            ]
        parts += [
            "Which ports a Chameleon node exposes, and why: [docs/security.md](security.md).",
            "",
        ]
    if res.get("stack"):
        parts += _stack(res["stack"])
    return "\n".join(parts)
