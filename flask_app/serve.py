"""Serve the Flask UI with waitress, in local mode and in its Docker image alike:

    python -m flask_app.serve --host 0.0.0.0 --port 5000

Why waitress: it reads each request completely in its event loop before a worker thread sees it,
so clients that connect and never finish their request (slow or hostile) hold a socket, not one
of the threads that answer everyone else. (gunicorn's sync and threaded workers give each such
client a worker thread until it times out: a handful of idle sockets stopped the page.)
"""

from __future__ import annotations

import argparse
import logging

from waitress import serve

from flask_app.app import HEALTH_THREADS, PREDICT_SLOTS, app
from servelab.serving.log_limit import RateLimit

# requests handled at once: the uploads (each may wait up to 60 s on the model server) and the
# threads kept for the page and /healthz (flask_app/app.py)
THREADS = PREDICT_SLOTS + HEALTH_THREADS
CONNECTIONS = 512  # open sockets accepted at once; idle ones are closed after CHANNEL_TIMEOUT
CHANNEL_TIMEOUT_S = 30
MAX_HEADER_BYTES = (
    64 * 1024
)  # request line + headers; waitress answers 431 above (its default: 256 KiB)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args(argv)
    # waitress warns once per queued request ("Task queue depth is N"): once a minute, counted
    logging.getLogger("waitress.queue").addFilter(RateLimit())
    # waitress's own body cap sits above Flask's, so an oversized photo gets the app's readable page
    # (Flask answers 413 above MAX_CONTENT_LENGTH); only far larger bodies are cut off here
    serve(
        app,
        host=args.host,
        port=args.port,
        threads=THREADS,
        connection_limit=CONNECTIONS,
        channel_timeout=CHANNEL_TIMEOUT_S,
        max_request_body_size=4 * app.config["MAX_CONTENT_LENGTH"],
        max_request_header_size=MAX_HEADER_BYTES,
        ident="food11-ui",
    )


if __name__ == "__main__":
    main()
