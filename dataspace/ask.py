"""Ask a model for JSON, validate the reply, and ask again with the errors as feedback.

Every model call of the builder (translator, document writer, storyboard planner) and of the
failure audit is the same loop: make an attempt, read the JSON out of the reply
(``extract_json``), check it with the caller's deterministic validator, and on errors ask
again, a bounded number of times, with the rejected replies and their errors in hand
(``ask``). What an attempt sends (a request record, a conversation) and what the caller does
when no attempt passes (reject the item, leave a proposal blank) stay the caller's;
``retry_messages`` builds the usual chat conversation of a retry.

A reply that is not the JSON asked for raises ``ReplyError`` inside an attempt: it counts
as a rejected attempt whose one error is the exception's message.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dataspace.errors import ReplyError

logger = logging.getLogger(__name__)

T = TypeVar("T")

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_OBJECT = re.compile(r"\{.*\}", re.S)


def extract_json(text: str | None, *, embedded: bool = False) -> dict[str, Any]:
    r"""The JSON object of a model reply: the whole text, or the body of one ```json fence.

    Args:
        text: the reply's text.
        embedded: read the outermost ``{...}`` wherever it stands in the text (prose around
            it is ignored).

    Raises:
        ReplyError: the reply is empty, not valid JSON, or not one JSON object (the message
            is the feedback for the model).

    >>> extract_json('```json\n{"items": []}\n```')
    {'items': []}
    >>> extract_json('The cause: {"subtype": "M1"}.', embedded=True)
    {'subtype': 'M1'}
    >>> extract_json("[1]")
    Traceback (most recent call last):
    ...
    dataspace.errors.ReplyError: the reply must be one JSON object
    """
    if not text or not text.strip():
        raise ReplyError("the reply is empty; answer with one JSON object", raw=text or "")
    body = text.strip()
    found = (_OBJECT if embedded else _FENCE).search(body)
    if found:
        body = found.group(0) if embedded else found.group(1)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ReplyError(
            f"the reply is not valid JSON ({exc.msg} at char {exc.pos})", raw=text
        ) from None
    if not isinstance(obj, dict):
        raise ReplyError("the reply must be one JSON object", raw=text)
    return obj


@dataclass(frozen=True, kw_only=True)
class Rejection:
    """One rejected attempt.

    Attributes:
        reply: the reply as it goes back into the conversation: its text, or the assistant
            message itself ('' when the attempt kept nothing).
        errors: why it was rejected (the validator's errors, or the ``ReplyError``).
    """

    reply: str | Mapping[str, Any]
    errors: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Asked(Generic[T]):
    """How an ``ask`` ended.

    Attributes:
        value: the first value that passed validation (None when none did).
        attempts: attempts made.
        rejections: the rejected attempts, in order.
    """

    value: T | None
    attempts: int
    rejections: tuple[Rejection, ...]

    @property
    def ok(self) -> bool:
        """Whether an attempt passed."""
        return self.value is not None

    @property
    def errors(self) -> list[str]:
        """The errors of the last rejected attempt ([] when none was rejected)."""
        return list(self.rejections[-1].errors) if self.rejections else []


def ask(
    attempt: Callable[[tuple[Rejection, ...]], tuple[T, str | Mapping[str, Any]]],
    validate: Callable[[T], Sequence[str]],
    *,
    max_attempts: int,
    what: str = "reply",
) -> Asked[T]:
    """Attempt until a value passes ``validate``, at most ``max_attempts`` times.

    Args:
        attempt: asks the model once, given the rejections so far, and returns the value
            read from the reply and the reply as it goes back into the conversation; raises
            ``ReplyError`` for a reply that is not the JSON asked for.
        validate: the value's errors ([] when it is good).
        max_attempts: the attempt budget.
        what: names the request in the log.

    Returns:
        The first good value with its attempt count, or no value and every rejection.
    """
    rejections: list[Rejection] = []
    for n in range(1, max_attempts + 1):
        try:
            value, reply = attempt(tuple(rejections))
            errors = list(validate(value))
        except ReplyError as exc:
            reply, errors = exc.raw, [str(exc)]
        if not errors:
            return Asked(value=value, attempts=n, rejections=tuple(rejections))
        logger.info("%s: attempt %d of %d rejected: %s", what, n, max_attempts, errors[0])
        rejections.append(Rejection(reply=reply, errors=tuple(errors)))
    return Asked(value=None, attempts=max_attempts, rejections=tuple(rejections))


def retry_messages(
    messages: Sequence[Mapping[str, Any]],
    rejections: Sequence[Rejection],
    feedback: Callable[[Sequence[str]], str],
) -> list[dict[str, Any]]:
    """A retry's conversation: the first messages, then each rejected reply and its feedback.

    >>> r = Rejection(reply="{}", errors=("x is missing",))
    >>> retry_messages([{"role": "user", "content": "q"}], [r], lambda e: "; ".join(e))[1:]
    [{'role': 'assistant', 'content': '{}'}, {'role': 'user', 'content': 'x is missing'}]
    """
    out = [dict(m) for m in messages]
    for r in rejections:
        said = (
            r.reply if isinstance(r.reply, Mapping) else {"role": "assistant", "content": r.reply}
        )
        out += [dict(said), {"role": "user", "content": feedback(r.errors)}]
    return out


__all__ = ["Asked", "Rejection", "ask", "extract_json", "retry_messages"]
