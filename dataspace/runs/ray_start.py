"""The one way DataSpace connects to Ray (the CLI, the demo and the Ray job entrypoints).

``connect_ray`` joins the cluster at an address (``ray.address`` of the spec, the job's
``RAY_ADDRESS``) or starts a local instance, with the same arguments everywhere:

- an address is first checked with a plain TCP connection bounded by ``timeout`` seconds,
  so an unreachable head is one clear error instead of minutes of retries;
- Ray's start-up banners and the raw lines its C++ core writes to the terminal are kept
  off the user's screen: they go to this module's logger (``-v`` shows them);
- Ray replaces the process's SIGTERM handler while it starts; the caller's handler is put
  back, so a SIGTERM is handled the way the caller decided (the CLI treats it as Ctrl-C).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from dataspace.errors import ConfigError

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT = 10.0
RAY_DEFAULT_PORT = 6379


def ray_endpoint(address: str) -> tuple[str, int] | None:
    """The (host, port) a Ray address names, or None for ``auto``/``local``.

    >>> ray_endpoint("10.0.0.5:6379"), ray_endpoint("ray://head:10001"), ray_endpoint("auto")
    (('10.0.0.5', 6379), ('head', 10001), None)
    >>> ray_endpoint("http://head:8265")
    ('head', 8265)
    """
    if address in ("auto", "local", ""):
        return None
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if not parts.hostname:
        return None
    return parts.hostname, parts.port or RAY_DEFAULT_PORT


def check_reachable(address: str, *, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
    """Raise ConfigError when nothing answers at ``address`` within ``timeout`` seconds."""
    endpoint = ray_endpoint(address)
    if endpoint is None:
        return
    host, port = endpoint
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigError(
            f"ray.address {address!r}: nothing answers at {host}:{port} ({reason} within "
            f"{timeout:g} s); start the cluster (`ray start --head`) or fix the address"
        ) from None


def connect_ray(
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
    **extra: Any,
) -> bool:
    """Connect to Ray unless already connected; return True when this call connected.

    Args:
        address: a cluster address; None (and no ``RAY_ADDRESS``) starts a local instance.
        num_cpus: CPUs of a local instance (ignored when joining a cluster).
        timeout: seconds to wait for a TCP answer at ``address``.
        **extra: further ``ray.init`` keyword arguments (e.g. ``_temp_dir``).

    Raises:
        ConfigError: the address does not answer.
    """
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if address:
        check_reachable(address, timeout=timeout)
        kwargs["address"] = address
    elif num_cpus is not None:
        kwargs["num_cpus"] = max(1, int(num_cpus))
    kwargs.update(extra)
    if address and "://" in address:
        kwargs.pop("include_dashboard", None)  # not accepted by the Ray client
    with _keep_sigterm_handler(), _terminal_to_log():
        ray.init(**kwargs)
    return True


@contextlib.contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and before is not None:
            signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def _terminal_to_log() -> Iterator[None]:
    """Send what is written to fds 1 and 2 meanwhile to the logger instead of the terminal."""
    try:
        fd1, fd2 = os.dup(1), os.dup(2)
    except OSError:  # no standard streams (a daemon): nothing to hide
        yield
        return
    with tempfile.TemporaryFile(prefix="dataspace-ray-start-") as tmp:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(fd1, 1)
            os.dup2(fd2, 2)
            os.close(fd1)
            os.close(fd2)
            tmp.seek(0)
            for line in tmp.read().decode("utf-8", "replace").splitlines():
                if line.strip():
                    logger.info("ray: %s", line)


__all__ = ["DEFAULT_CONNECT_TIMEOUT", "check_reachable", "connect_ray", "ray_endpoint"]
