"""The trace writer: one attempt's ``events.jsonl``, appended event by event."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from dataspace.traces.events import Event

# One encoder for every line: what ``json.dumps(rec, ensure_ascii=False, default=str)``
# writes, without building an encoder per event.
_ENCODE = json.JSONEncoder(ensure_ascii=False, default=str).encode


class EventLog:
    """Append-only JSONL trace of one attempt (thread-safe, flushed per event)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fh = path.open("a", encoding="utf-8")
        self._t0 = time.monotonic()

    def emit(self, event: Event) -> None:
        """Append one event with its offset in seconds from the attempt start."""
        rec = {"t": round(time.monotonic() - self._t0, 6), "type": event.kind, **event.payload()}
        line = _ENCODE(rec)
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if not self._fh.closed:
                self._fh.close()


__all__ = ["EventLog"]
