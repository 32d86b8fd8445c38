"""Requests known to crash tritonserver 2.51, recognised before they are sent to it.

Measured on the lab's Triton (2.51, local mode; issue 43), one request ends the whole server:
- `classification` asked as a parameter of an output whose datatype is BYTES (food_classifier's
  FOOD_LABEL): SIGFPE, over HTTP and gRPC alike (Triton's classification divides by the size of
  an element, which a BYTES tensor does not have);
- a JSON request body nested 50,000 levels deep (100 KB, e.g. `"data": [[[[...]]]]`): SIGSEGV in
  the HTTP frontend's JSON parser, which recurses once per level.
Both are Triton's own defects (its 2.51 has no option against either). Triton listens on the
node only, and its watchdog starts a crashed server again (servelab.serving.triton_watchdog,
backing off but never giving up); where the lab's own code forwards a request to Triton (the
Flask page's Triton backend, flask_app/backends.py), refusal() is asked first and the request
answered 400 with its message instead (docs/security.md lists who else can send them).
"""

from __future__ import annotations

import re

# The deepest a KServe v2 inference request needs: the body, "inputs", one input, and its "data"
# nested once per dimension (Triton takes at most 64 dimensions; the lab's tensors have 4).
MAX_JSON_DEPTH = 72
_STRUCTURE = re.compile(rb'["\[\]{}]')
_STRING_END = re.compile(rb'(?<!\\)(?:\\\\)*"')


def json_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """How deeply the JSON text `body` nests arrays and objects (strings skipped), counted no
    further than limit + 1: the cost stays linear in the body, whatever it holds."""
    depth = deepest = at = 0
    while True:
        found = _STRUCTURE.search(body, at)
        if found is None:
            return deepest
        char = found.group()
        if char == b'"':  # skip the string, escaped quotes included
            end = _STRING_END.search(body, found.end())
            if end is None:
                return deepest
            at = end.end()
            continue
        depth += 1 if char in b"[{" else -1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        at = found.end()


def bytes_classification(outputs: list[dict], datatypes: dict[str, str]) -> list[str]:
    """The requested outputs that ask for `classification` on a BYTES output (`outputs`: as in
    the request's JSON, {"name": ..., "parameters": {...}}; datatypes: the model's metadata)."""
    return [
        out.get("name", "")
        for out in outputs or []
        if isinstance(out, dict)
        and "classification" in (out.get("parameters") or {})
        and datatypes.get(out.get("name", "")) == "BYTES"
    ]


def refusal(body: bytes = b"", outputs: list[dict] = (), datatypes: dict | None = None) -> str:
    """Why this request must not reach Triton ('' if it may): `body`, the request's JSON text;
    `outputs` and `datatypes`, the outputs it asks for and the model's output datatypes."""
    if body and json_depth(body) > MAX_JSON_DEPTH:
        return (
            f"The request's JSON nests deeper than {MAX_JSON_DEPTH} levels, which Triton 2.51 "
            "cannot parse (its server crashes): send each input's data as one flat list, with "
            "its shape in 'shape'."
        )
    bad = bytes_classification(list(outputs), datatypes or {})
    if bad:
        return (
            f"'classification' is asked of output {', '.join(bad)}, whose datatype is BYTES: "
            "Triton 2.51 crashes on it. Ask classification only of a numeric output (e.g. "
            "logits), or read the label from this output as it is."
        )
    return ""
