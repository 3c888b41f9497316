"""The ``llm`` translator: an OpenAI-compatible chat endpoint through the ``openai`` package.

Deterministic decoding (temperature 0), JSON replies (fences tolerated, read by
``dataspace.ask.extract_json``), and a bounded number of transport retries inside the
client. Replies that are not JSON objects raise ``ReplyError`` so that ``ask`` retries with
the error as feedback; the content checks are the caller's validators. The key is read
from an environment variable and never recorded.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from builder.translate.base import TranslationRequest, register_translator
from builder.translate.prompts import messages
from dataspace.ask import extract_json
from dataspace.errors import ConfigError, ReplyError

logger = logging.getLogger(__name__)

DEFAULT_KEY_ENV = "DATASPACE_TRANSLATOR_API_KEY"


@register_translator("llm")
class LLMTranslator:
    """Translator backed by an OpenAI-compatible chat-completions endpoint.

    Args:
        model: the model id.
        base_url: the endpoint (``https://.../v1``).
        api_key_env: environment variable holding the key.
        timeout: seconds per request.
        max_retries: transport retries (429, 5xx, connection errors) inside the client.
        json_mode: ask for ``response_format={"type": "json_object"}``.
        judge: whether the question–SQL judge uses this model.
        max_tokens: output ceiling per reply.
    """

    name = "llm"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key_env: str = DEFAULT_KEY_ENV,
        timeout: float = 120.0,
        max_retries: int = 3,
        json_mode: bool = True,
        judge: bool = True,
        max_tokens: int | None = 4096,
    ) -> None:
        try:
            import openai
        except ImportError:  # pragma: no cover - openai is a dependency
            raise ConfigError(
                "the llm translator needs the openai package (pip install openai)"
            ) from None
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(
                f"the llm translator reads its API key from ${api_key_env}, which is not set"
            )
        self.model = model
        self.base_url = base_url
        self.json_mode = json_mode
        self.supports_judge = judge
        self.max_tokens = max_tokens
        self._client = openai.OpenAI(
            api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )
        self.calls = 0
        self.usage = {"input_tokens": 0, "output_tokens": 0}

    def describe(self) -> dict[str, Any]:
        """Provider settings for ledgers and cache keys (no secrets)."""
        return {
            "name": self.name,
            "model": self.model,
            "base_url": self.base_url,
            "json_mode": self.json_mode,
            "judge": self.supports_judge,
        }

    def complete(self, request: TranslationRequest) -> dict[str, Any]:
        """Send one request and parse the JSON reply.

        Raises:
            ReplyError: the reply is not one JSON object.
            InfrastructureError: the endpoint failed past the client's retries.
        """
        import openai

        from dataspace.errors import InfrastructureError

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages(request),
            "temperature": 0,
        }
        if self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if self.max_tokens:
            kwargs["max_tokens"] = self.max_tokens
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.RateLimitError,
            openai.InternalServerError,
        ) as exc:
            raise InfrastructureError(
                f"translator endpoint failed: {exc}", code="translator_unavailable"
            ) from exc
        except openai.APIStatusError as exc:
            raise ConfigError(
                f"translator endpoint refused the request ({exc.status_code}): {exc.message}"
            ) from exc
        self.calls += 1
        if resp.usage is not None:
            self.usage["input_tokens"] += resp.usage.prompt_tokens or 0
            self.usage["output_tokens"] += resp.usage.completion_tokens or 0
        if not resp.choices:
            raise ReplyError("the reply has no choices")
        return extract_json(resp.choices[0].message.content)


__all__ = ["DEFAULT_KEY_ENV", "LLMTranslator"]
