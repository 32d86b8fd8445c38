"""How long notebooks 1 and 2 wait for Chameleon, and the one loop that does it.

Each long wait has a limit a little past what the site usually takes; when it runs out, the
notebook stops with one sentence (what happened, what you still hold, what to do next), never a
library's traceback. Running the cell again waits again for the same thing: nothing is made twice.

A site's APIs fail now and then for a moment: Nova, Blazar or Neutron answers 500, 502, 503 or
504, or the connection is reset or refused. During a wait such a passing fault is said in one
line (once while it lasts) and asked again at the wait's pace; only a fault that lasts
FAULT_MINUTES (every answer in that time a fault) ends the wait, with one sentence. The faults
are told apart from other errors by the clients' own exception classes (keystoneauth,
novaclient, neutronclient, blazarclient, openstacksdk), also when python-chi wraps them in its
ResourceError.
"""

from __future__ import annotations

import time

# Blazar's STARTING (or UPDATING): it prepares the lease's hosts, a few minutes.
LEASE_START_MINUTES = 15
# A bare-metal boot (Nova's BUILD): 10 to 20 minutes, now and then more.
BOOT_MINUTES = 30
# SSH: the node's sshd starts, and cloud-init installs your key, minutes after ACTIVE.
SSH_MINUTES = 15
# A bare-metal server's delete: the node is powered off and torn down, a few minutes.
DELETE_MINUTES = 10
# The site's APIs failing on every try for this long is not a passing fault: the wait stops.
FAULT_MINUTES = 5
SERVER_ERRORS = (500, 502, 503, 504)  # 501 (not implemented) does not pass


class Wait:
    """One wait: what it asks (`asking`: "Nova", "Blazar"), what for, and what the student
    holds meanwhile, for the sentence that ends it when the site's fault lasts."""

    def __init__(self, asking: str, waiting_for: str, holding: str):
        self.asking, self.waiting_for, self.holding = asking, waiting_for, holding
        self.faulty_since: float | None = None  # when the faults in a row began
        self.said: str | None = None  # the last fault said (the same one again is not)

    def ask(self, call, every_s: float = 15):
        """call() once, asked again after a passing fault of the site (up to FAULT_MINUTES)."""
        while True:
            try:
                found = call()
            except Exception as err:  # the site's fault, or raised as it is
                self.fault(err, every_s)
                time.sleep(every_s)
                continue
            self.faulty_since = self.said = None
            return found

    def until(self, check, minutes: float, every_s: float):
        """Call check() every every_s seconds until it returns something other than None, for
        at most `minutes`; return that, or None when the time ran out (check() ran one last
        time). A passing fault of the site is one more try."""
        deadline = time.monotonic() + minutes * 60
        while True:
            try:
                found = check()
            except Exception as err:  # the site's fault, or raised as it is
                self.fault(err, every_s, deadline)
                found = None
            else:
                self.faulty_since = self.said = None
            if found is not None:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(every_s, left))

    def fault(self, err: Exception, every_s: float, deadline: float | None = None) -> None:
        """Say a passing fault in one line, or stop once the faults have lasted (or the wait's
        own limit came during them); any other error goes on up as it is."""
        what = site_fault(err)
        if what is None:
            raise err
        now = time.monotonic()
        self.faulty_since = now if self.faulty_since is None else self.faulty_since
        lasted = now - self.faulty_since
        if lasted >= FAULT_MINUTES * 60 or (deadline is not None and now >= deadline):
            raise RuntimeError(
                f"{self.asking} has failed every time this cell asked it for "
                f"{max(1, round(lasted / 60))} minute(s) (last: {what}) while it waited for "
                f"{self.waiting_for}: the site is having trouble, not your lease or server, and "
                f"{self.holding}; run this cell again in 15 minutes (it waits again for the same "
                "thing, nothing is made twice), and if it fails again, tell your instructor."
            ) from None
        if what != self.said:  # one line for a fault, not one for each time it is met again
            print(
                f"{self.asking}: {what}, a passing fault of the site; asking again every "
                f"{every_s:g} s (a fault that lasts {FAULT_MINUTES} minutes stops the wait)"
            )
        self.said = what


def site_fault(err: BaseException) -> str | None:
    """A passing fault of the site, in a few words ("HTTP 503", "the connection was reset"),
    or None: the error is not one (a 404, a refusal, a bug), or not the site's."""
    from blazarclient.exception import BlazarClientException
    from keystoneauth1 import exceptions as ksa
    from neutronclient.common.exceptions import NeutronClientException
    from novaclient.exceptions import ClientException as NovaError
    from openstack.exceptions import HttpException as SDKHttpError
    from requests.exceptions import ConnectionError as RequestsConnectionError

    seen = set()
    while err is not None and id(err) not in seen:  # python-chi wraps: ResourceError(e)
        seen.add(id(err))
        status = None
        if isinstance(err, ksa.HttpError):
            status = err.http_status
        elif isinstance(err, NovaError):
            status = err.code
        elif isinstance(err, NeutronClientException):
            status = err.status_code
        elif isinstance(err, BlazarClientException):
            status = err.kwargs.get("code")
        elif isinstance(err, SDKHttpError):
            status = err.status_code
        if status in SERVER_ERRORS:
            return f"HTTP {status}"
        if status is not None:
            return None
        if isinstance(err, (ksa.ConnectFailure, ksa.ConnectTimeout, ksa.UnknownConnectionError)):
            return _connection_words(err)
        if isinstance(err, (RequestsConnectionError, ConnectionError)):
            return _connection_words(err)
        err = err.__cause__ or err.__context__
    return None


def _connection_words(err) -> str:
    text = str(err).lower()
    if "reset" in text:
        return "the connection was reset"
    if "refused" in text:
        return "the connection was refused"
    if "timed out" in text or "timeout" in text:
        return "no answer in time"
    return "the connection was closed without an answer"


def minutes_since(started: float) -> int:
    """Whole minutes since a time.monotonic() reading, for the sentences."""
    return round((time.monotonic() - started) / 60)
