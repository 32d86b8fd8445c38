"""A log that cannot grow with the load: at most one record per message and interval.

Under a flood, waitress logged "Task queue depth is N" once per queued request: 2.3 MB from one
20 s flood against the Flask page (about 400 MB an hour), in a log nothing rotates. A RateLimit
filter on a logger lets the first record of each message through, drops the others for
`interval_s`, and adds to the next one it lets through how many it dropped:

    logging.getLogger("waitress.queue").addFilter(RateLimit(60))
    # WARNING Task queue depth is 9 (and 1,234 more like it in the last 60 s, not logged)
"""

from __future__ import annotations

import logging
import threading
import time

INTERVAL_S = 60.0  # one record per message a minute: a flood shows, the log stays small


class RateLimit(logging.Filter):
    """Pass one record per (logger, message template) every interval_s; count the rest."""

    def __init__(self, interval_s: float = INTERVAL_S):
        super().__init__()
        self.interval_s = interval_s
        self._last: dict[tuple, float] = {}
        self._dropped: dict[tuple, int] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.msg)  # the template: "depth is %d", not each depth
        now = time.monotonic()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                self._dropped[key] = self._dropped.get(key, 0) + 1
                return False
            self._last[key] = now
            dropped = self._dropped.pop(key, 0)
        if dropped:  # the text added holds no '%', so formatting with record.args still works
            record.msg = (
                f"{record.msg} (and {dropped:,} more like it in the last {self.interval_s:g} s, "
                "not logged)"
            )
        return True
