"""Work of the report done in a forked process while this one goes on with the rest.

Drawing a figure is pure Python under the GIL, so threads would not overlap it with the
statistics; a forked child does, on a second core, and gets the frames it draws from for
free (copy-on-write). Each job's result must be picklable (SVG text). Where ``fork`` is
not available, or the child fails, the jobs run here instead: the result is the same, only
later.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
from collections.abc import Callable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

Jobs = Mapping[str, Callable[[], Any]]


class Background:
    """Jobs running in a forked child; :meth:`results` waits for them."""

    def __init__(self, jobs: Jobs) -> None:
        """Start ``jobs`` (name -> a function of no arguments) in a forked child."""
        self._jobs = dict(jobs)
        self._proc: Any = None
        self._conn: Any = None
        if not self._jobs or "fork" not in multiprocessing.get_all_start_methods():
            return
        ctx = multiprocessing.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        try:
            self._proc = ctx.Process(target=_child, args=(self._jobs, send), daemon=True)
            self._proc.start()
        except OSError as exc:
            logger.info("report: no forked worker (%s); drawing in this process", exc)
            self._proc = None
            recv.close()
        else:
            self._conn = recv
        finally:
            send.close()

    def results(self) -> dict[str, Any]:
        """Each job's result, by name (from the child, or computed here if it failed)."""
        if self._proc is not None:
            try:
                data = self._conn.recv_bytes()
                status, payload = pickle.loads(data)
            except (EOFError, OSError, pickle.UnpicklingError) as exc:
                status, payload = "error", f"the worker ended without a result ({exc})"
            finally:
                self._conn.close()
                self._proc.join()
            if status == "ok":
                return dict(payload)
            logger.warning("report: the forked worker failed (%s); drawing here", payload)
        return {name: job() for name, job in self._jobs.items()}


def _child(jobs: Jobs, conn: Any) -> None:
    try:
        out = ("ok", {name: job() for name, job in jobs.items()})
    except BaseException as exc:  # reported to the parent, which runs the jobs itself
        out = ("error", f"{type(exc).__name__}: {exc}")
    try:
        conn.send_bytes(pickle.dumps(out))
    finally:
        conn.close()
        os._exit(0)  # no atexit handlers or finalizers of the parent's objects


__all__ = ["Background"]
