"""One tritonclient HTTP client per thread and server, for the lab's threaded callers (the Flask UI
under waitress, the reliability suite's soak). tritonclient.http's client keeps a gevent
connection pool that must not be shared between threads; the notebooks, single-threaded, make
their own `InferenceServerClient` as Triton's documentation shows."""

from __future__ import annotations

import threading

_local = threading.local()


def for_this_thread(url: str):
    """The tritonclient.http client of this thread for `url` (http://host:port or host:port)."""
    import tritonclient.http as httpclient

    cache = _local.__dict__.setdefault("by_url", {})
    key = url.split("://")[-1].rstrip("/")
    if key not in cache:
        cache[key] = httpclient.InferenceServerClient(
            key, connection_timeout=5.0, network_timeout=60.0
        )
    return cache[key]
