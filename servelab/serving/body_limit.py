"""A request body limit that holds while the body is read: chunked bodies included.

A Content-Length check alone lets a client that sends `Transfer-Encoding: chunked` stream any
amount into memory (the framework reads the whole body before parsing the JSON). This ASGI
middleware counts the bytes as they arrive and answers 413 at the first byte over the limit;
the application then sees a disconnected client and reads nothing more, so memory stays bounded
by the limit.
"""

from __future__ import annotations

import json


class BodySizeLimit:
    """Wrap an ASGI app: refuse request bodies over `max_bytes` with 413 and `message(size)`."""

    def __init__(self, app, max_bytes: int, message):
        self.app, self.max_bytes, self.message = app, max_bytes, message

    def __getattr__(self, name):  # the wrapped app's attributes (app.state, routes) stay reachable
        return getattr(self.app, name)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send, int(declared))
        received = 0
        refused = False
        started = False

        async def counting_receive():
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    refused = True
                    if not started:
                        await self._refuse(send, received, more=message.get("more_body", False))
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            nonlocal started
            if refused:
                return  # our 413 went out; the app's own answer to the "disconnect" is dropped
            started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not refused:  # only the app's reaction to our cut-off is ours to swallow
                raise

    async def _refuse(self, send, size: int, more: bool = False) -> None:
        body = json.dumps({"detail": self.message(size, more)}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"connection", b"close"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
