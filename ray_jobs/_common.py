"""What the entrypoints share: logging set-up, one-line errors, ``key=value`` options."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dataspace.errors import ConfigError, DataSpaceError


def setup_logging(verbose: bool) -> None:
    """Log to stderr (the job's log) at INFO, or DEBUG with ``--verbose``."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # the HTTP clients' loggers (the kubernetes client library logs each request)
    for noisy in ("urllib3", "botocore", "boto3", "s3transfer", "kubernetes.client"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def parse_options(pairs: Sequence[str], *, flag: str) -> dict[str, Any]:
    """``key=value`` flags into a dict; values are JSON when they parse, else strings.

    >>> parse_options(["namespace=sb", "max_pending=8", 'node_selector={"a": "b"}'], flag="-o")
    {'namespace': 'sb', 'max_pending': 8, 'node_selector': {'a': 'b'}}
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {pair!r}: expected key=value")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def run_main(body: Callable[[], int]) -> int:
    """Run an entrypoint body; library errors become one line and exit code 2."""
    try:
        return body()
    except DataSpaceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; submit the same job again to resume", file=sys.stderr)
        return 130
