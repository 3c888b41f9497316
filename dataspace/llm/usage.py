"""Token counts and prices: what one model call used and what it cost.

Providers report usage in the OpenAI chat-completions shape::

    {"prompt_tokens": 1200, "completion_tokens": 300,
     "prompt_tokens_details": {"cached_tokens": 1000},
     "completion_tokens_details": {"reasoning_tokens": 120}}

Cached prompt tokens are a subset of the input tokens and reasoning tokens a subset of the
output tokens: neither is ever added to a total a second time. The cost is

    (input - cached) * price_input + cached * price_cached_input + output * price_output

with prices in US dollars per million tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

_PER = 1_000_000


@dataclass(frozen=True, kw_only=True)
class TokenCounts:
    """Tokens of one call (or a sum of calls) as the provider reported them."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def plus(self, other: TokenCounts) -> TokenCounts:
        """The sum of two counts.

        >>> TokenCounts(input_tokens=3).plus(TokenCounts(input_tokens=4)).input_tokens
        7
        """
        return TokenCounts(
            input_tokens=self.input_tokens + other.input_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output (cached and reasoning are already inside them)."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, kw_only=True)
class Prices:
    """US dollars per million tokens."""

    input: float = 0.0
    cached_input: float = 0.0
    output: float = 0.0

    @classmethod
    def of(cls, model: Any) -> Prices:
        """The prices of a ``ModelSpec`` (or anything with the same price attributes)."""
        return cls(
            input=float(getattr(model, "price_input", 0.0) or 0.0),
            cached_input=float(getattr(model, "price_cached_input", 0.0) or 0.0),
            output=float(getattr(model, "price_output", 0.0) or 0.0),
        )


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


def token_counts(usage: Mapping[str, Any] | None) -> TokenCounts:
    """Read a chat-completions ``usage`` object; missing or malformed fields count as 0.

    A cached count above the input count (or reasoning above output) is clamped, so the
    uncached remainder is never negative.

    >>> token_counts({"prompt_tokens": 100, "completion_tokens": 20,
    ...               "prompt_tokens_details": {"cached_tokens": 60},
    ...               "completion_tokens_details": {"reasoning_tokens": 5}})
    TokenCounts(input_tokens=100, cached_input_tokens=60, output_tokens=20, reasoning_tokens=5)
    >>> token_counts(None).input_tokens
    0
    """
    if not isinstance(usage, Mapping):
        return TokenCounts()
    inp = _int(usage.get("prompt_tokens"))
    out = _int(usage.get("completion_tokens"))
    pd = usage.get("prompt_tokens_details")
    cd = usage.get("completion_tokens_details")
    cached = _int(pd.get("cached_tokens")) if isinstance(pd, Mapping) else 0
    reasoning = _int(cd.get("reasoning_tokens")) if isinstance(cd, Mapping) else 0
    if cached > inp or reasoning > out:
        logger.warning("usage reports more cached/reasoning tokens than input/output: %s", usage)
    return TokenCounts(
        input_tokens=inp,
        cached_input_tokens=min(cached, inp),
        output_tokens=out,
        reasoning_tokens=min(reasoning, out),
    )


def cost_usd(tokens: TokenCounts, prices: Prices) -> float:
    """The price formula: uncached input, cached input and output at their own prices.

    >>> cost_usd(TokenCounts(input_tokens=1_000_000, cached_input_tokens=400_000,
    ...                      output_tokens=100_000), Prices(input=2.0, cached_input=0.5,
    ...                                                     output=8.0))
    2.2
    """
    uncached = tokens.input_tokens - tokens.cached_input_tokens
    return (
        uncached * prices.input
        + tokens.cached_input_tokens * prices.cached_input
        + tokens.output_tokens * prices.output
    ) / _PER


def format_usd(amount: float) -> str:
    """Dollars with digits enough to compare two amounts: cents from $1, else 4 significant.

    A spend limit and what was spent print the same way, so ``$0.008`` and ``$0.0084``
    are never shown as ``$0.01`` and ``$0.0084``.

    >>> format_usd(0.0084), format_usd(0.008), format_usd(0.01), format_usd(0.5)
    ('$0.0084', '$0.008', '$0.01', '$0.50')
    >>> format_usd(1234.5), format_usd(0), format_usd(1e-9)
    ('$1,234.50', '$0.00', '$0.000000001')
    """
    import math

    x = float(amount)
    if x == 0 or not math.isfinite(x):
        return "$0.00" if x == 0 else f"${x}"
    if abs(x) >= 1:
        return f"${x:,.2f}"
    digits = 3 - math.floor(math.log10(abs(x)))
    whole, _, frac = f"{x:.{digits}f}".rstrip("0").partition(".")
    return f"${whole}.{frac.ljust(2, '0')}"


__all__ = ["Prices", "TokenCounts", "cost_usd", "format_usd", "token_counts"]
