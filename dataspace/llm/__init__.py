"""Model access: a metered OpenAI-compatible client, concurrency caps and a relay.

``import dataspace.llm`` stays cheap: the openai SDK is imported when a client is built and
Ray only when a cluster-wide limiter is asked for.
"""

from dataspace.llm.client import (
    CallRecord,
    Completion,
    MeteredClient,
    ModelDeadlineError,
    ModelRequestError,
    RetryPolicy,
    ToolCall,
    parse_retry_after,
)
from dataspace.llm.limiter import LocalLimiter, endpoint_key, get_limiter
from dataspace.llm.models import ModelSpec, load_models, parse_model
from dataspace.llm.usage import Prices, TokenCounts, cost_usd, token_counts

__all__ = [
    "CallRecord",
    "Completion",
    "LocalLimiter",
    "MeteredClient",
    "ModelDeadlineError",
    "ModelRequestError",
    "ModelSpec",
    "Prices",
    "RetryPolicy",
    "TokenCounts",
    "ToolCall",
    "cost_usd",
    "endpoint_key",
    "get_limiter",
    "load_models",
    "parse_model",
    "parse_retry_after",
    "token_counts",
]
