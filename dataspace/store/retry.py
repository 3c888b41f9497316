"""Bounded exponential backoff for store calls that fail for transient reasons.

The S3 backend gets two layers: botocore retries each HTTP request (``standard`` or
``adaptive`` mode), and ``call_with_backoff`` retries our whole operation (a put, a get and
its body read, one listing page, a multipart transfer) a bounded number of times with
full-jitter exponential delays. Throttling (429, ``SlowDown``), 5xx answers and connection
errors are transient; anything else is raised at once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: S3 and AWS error codes worth retrying whatever their HTTP status.
TRANSIENT_CODES = frozenset(
    {
        "BandwidthLimitExceeded",
        "ConditionalRequestConflict",
        "InternalError",
        "OperationAborted",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestTimeout",
        "RequestTimeoutException",
        "ServiceUnavailable",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
    }
)


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """How often and how patiently to retry one operation.

    Attributes:
        attempts: total tries of the operation (1 disables our retries).
        base: the first delay cap in seconds; it doubles on each retry.
        cap: the largest delay cap in seconds.
    """

    attempts: int = 4
    base: float = 0.25
    cap: float = 10.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"backoff attempts must be at least 1, got {self.attempts}")
        if self.base < 0 or self.cap < 0:
            raise ValueError("backoff delays must not be negative")


def backoff_delay(attempt: int, *, base: float, cap: float, jitter: float) -> float:
    """The delay after failed try number ``attempt`` (1-based), with full jitter.

    Args:
        attempt: how many tries have failed so far.
        base: the first delay cap in seconds.
        cap: the largest delay cap in seconds.
        jitter: a number in [0, 1] (random in use) scaling the capped delay.

    >>> backoff_delay(1, base=0.5, cap=10.0, jitter=1.0)
    0.5
    >>> backoff_delay(3, base=0.5, cap=10.0, jitter=0.5)
    1.0
    >>> backoff_delay(10, base=0.5, cap=10.0, jitter=1.0)
    10.0
    """
    return jitter * min(cap, base * 2 ** (attempt - 1))


def is_transient(exc: BaseException) -> bool:
    """Whether a botocore/s3transfer failure is throttling, a 5xx or a connection error."""
    from botocore.exceptions import (
        ClientError,
        HTTPClientError,
        IncompleteReadError,
        ResponseStreamingError,
        SSLError,
    )
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from s3transfer.exceptions import RetriesExceededError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        code = str(error.get("Code", ""))
        if code in TRANSIENT_CODES or status == 429:
            return True
        # A 501 is a missing feature, not a transient fault.
        return status >= 500 and status != 501 and code != "NotImplemented"
    if isinstance(exc, SSLError):
        return False  # a certificate problem does not heal by waiting
    return isinstance(
        exc,
        BotoConnectionError
        | HTTPClientError
        | IncompleteReadError
        | ResponseStreamingError
        | RetriesExceededError,
    )


def call_with_backoff(
    fn: Callable[[], T],
    *,
    policy: Backoff,
    describe: str,
    transient: Callable[[BaseException], bool] = is_transient,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
) -> T:
    """Call ``fn`` until it succeeds, fails for good, or ``policy.attempts`` are used up.

    Args:
        fn: the operation; called again from scratch on each retry.
        policy: the number of tries and the delays.
        describe: what the operation is, for log lines.
        transient: decides which failures are worth retrying.
        sleep: waits between tries.
        rng: draws the jitter in [0, 1).

    Returns:
        What ``fn`` returned.

    Raises:
        BaseException: the last failure, annotated with ``retry_attempts`` (tries made).
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:
            if attempt >= policy.attempts or not transient(exc):
                exc.retry_attempts = attempt  # type: ignore[attr-defined]
                raise
            delay = backoff_delay(attempt, base=policy.base, cap=policy.cap, jitter=rng())
            logger.warning(
                "%s failed (%s), try %d of %d, retrying in %.2fs",
                describe,
                _short(exc),
                attempt,
                policy.attempts,
                delay,
            )
            sleep(delay)


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200]
