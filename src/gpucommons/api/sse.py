"""Server-sent events (the WHATWG HTML "server-sent events" format), both ways: the server writes
messages and comments, the client reads them back.

A message is `field: value` lines ended by a blank line; the fields used are `id` (the last one a
client saw comes back as `Last-Event-ID` when it reconnects), `event` (the message's type), `data`
(one line per line of text) and `retry` (how long a client waits before reconnecting, in ms). A line
starting with `:` is a comment: what a heartbeat sends, so proxies see traffic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_END = re.compile(rb"[\r\n]")


def message(data: str, *, event: str | None = None, id: int | str | None = None) -> bytes:
    """One message; `data` may span lines (each becomes its own `data:` line)."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines += [f"data: {line}" for line in data.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


def comment(text: str) -> bytes:
    return f": {text}\n\n".encode()


def retry(ms: int) -> bytes:
    return f"retry: {ms}\n\n".encode()


@dataclass(frozen=True)
class Message:
    event: str
    data: str
    #: The stream's last event id once this message is read (a message without `id:` keeps it).
    last_id: str


class Parser:
    """Feed it lines (without their line end); it answers each complete message, as the spec's
    "interpret an event stream" does: comments and unknown fields are ignored, a message with no
    data is not dispatched, `event` defaults to `message`."""

    def __init__(self) -> None:
        self.last_id = ""
        self.retry_ms: int | None = None
        self._data: list[str] = []
        self._event = ""
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[Message]:
        """The messages that `chunk` (bytes as they arrive) completes. Lines end with CR LF, LF or
        CR only (not at the other breaks `str.splitlines` knows, which JSON text may hold)."""
        self._buffer += chunk
        out = []
        while (found := _LINE_END.search(self._buffer)) is not None:
            at = found.start()
            if self._buffer[at : at + 1] == b"\r":
                if at + 1 == len(self._buffer):
                    break  # a LF may follow in the next chunk
                end = at + 2 if self._buffer[at + 1 : at + 2] == b"\n" else at + 1
            else:
                end = at + 1
            text, self._buffer = self._buffer[:at].decode("utf-8", "replace"), self._buffer[end:]
            message = self.line(text)
            if message is not None:
                out.append(message)
        return out

    def line(self, line: str) -> Message | None:
        if line == "":
            data, event = self._data, self._event
            self._data, self._event = [], ""
            if not data:
                return None
            return Message(event or "message", "\n".join(data), self.last_id)
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self.last_id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None
