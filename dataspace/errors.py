"""The one error tree of DataSpace.

Every exception class the project defines derives from ``DataSpaceError`` (a test walks
every module and fails on one that does not). Each error carries the context a user needs
(a path, a task id, a backend) and says how to fix the problem when there is something to
fix. The CLI prints ``str(error)`` as one line. The tree, with where each class lives when
it is not in this module and when it is raised::

    DataSpaceError
    ├── ConfigError              a run spec, models file, build spec, flag or environment
    │   │                        variable is invalid (raised before anything runs)
    │   ├── SpecChangedError     a run id is reused with a spec of another fingerprint
    │   ├── RunBusyError         another live invocation holds the run's lease
    │   └── PreflightError       (runs.preflight) preflight found problems; nothing was
    │                            recorded or started
    ├── ReleaseError             a release folder or one of its files is malformed
    ├── ReplyError               (also a ValueError) a model's reply is not the JSON object
    │                            asked for, or cannot be used: the endpoint's 200 body is no
    │                            chat completion (the client retries it like a transient
    │                            fault), or the text is not the requested JSON (the asking
    │                            loop, ``dataspace.ask``, sends the message back as feedback
    │                            and counts the attempt)
    ├── ToolRefused              an agent's tool call cannot be carried out (bad arguments,
    │   │                        unreadable file); never escapes the tool box: it becomes
    │   │                        the model's error observation, ``error_type`` included
    │   └── ImageRefused         (agents._image) the image cannot be shown
    ├── StoreError               a storage backend failed
    │   ├── NotFoundError        no object at that key
    │   └── AlreadyExistsError   a write-once object was written twice
    ├── SandboxError             the sandbox itself failed (infrastructure, never the agent)
    │   ├── SandboxClosedError   an operation on a closed sandbox
    │   ├── ApiCallError         (sandbox, kubernetes) a cluster API call failed for good
    │   ├── ExecLostError        (sandbox, kubernetes) an exec ended without the helper's
    │   │                        answer (the pod died or the stream broke)
    │   ├── PodFailedError       (sandbox, kubernetes) a sandbox pod failed for reasons
    │   │                        outside the agent's control (retried)
    │   └── SlotTimeoutError     (sandbox, kubernetes) no sandbox slot came free in time
    ├── AgentError               an agent or harness adapter failed inside the controller
    │   ├── ModelRequestError    (llm.client) the endpoint refused the request itself
    │   │                        (a 4xx other than auth or rate limits); carries the status
    │   └── ModelDeadlineError   (llm.client) no working time left for a model call
    ├── InfrastructureError      a retryable failure outside the agent's control (worker
    │   │                        lost, endpoint unreachable past retries, pod evicted);
    │   │                        carries ``code``, never scored as a wrong answer
    │   ├── RayStartError        (runs.ray_start) Ray could not be started or joined
    │   │   └── _StartFailed     (runs.ray_start) one start-up try failed (retried)
    │   ├── _Timeout             (llm.client) one request timed out (retried)
    │   └── _Connection          (llm.client) one request found no connection (retried)
    └── (builder, in ``builder/errors.py`` unless said otherwise)
        ├── SourceError          a Text-to-SQL source item or its database is unusable
        ├── ReviewError          a review request is refused; carries the HTTP status
        │   └── ProtocolError    (builder.review.protocol) an event the protocol does not
        │                        allow in the task's current state (HTTP 409)
        ├── EncodingError        (also a RuntimeError) ffmpeg is missing or failed
        └── BuildError           a builder stage rejected an item (item, stage, reason);
            │                    the driver records it and goes on with the next item
            └── Rejected         raised inside a stage, before the item's id is attached
                ├── TranslationError          (builder.translate.base) no valid
                │                             translation within the attempt budget
                ├── TemplateMiss              (builder.translate.templates) the question
                │                             cannot be rendered from a template
                ├── DatabaseTranslationError  (builder.transform.database) the database
                │                             cannot be translated (map gate, translator
                │                             or migration)
                ├── MigrationError            (builder.transform.migrate) the migration
                │                             was rolled back
                ├── SamplingError             (builder.sampling.sampler) sampling failed;
                │                             ``retry`` when another seed may help
                ├── GoldRejected              (builder.gold) the gold query fails or
                │                             returns an unusable result
                ├── RoutingFailure            (builder.render.routing) no renderer can
                │                             represent a table
                ├── DocumentRejected          (builder.documents.assembly) a table cannot
                │                             become a faithful document
                ├── StrategyRejected          (builder.video.strategies) the task does
                │                             not fit a video strategy
                ├── StoryboardRejected        (builder.video.storyboard) no valid
                │                             storyboard within the attempt budget
                └── VideoRejected             (builder.render.video) the video failed a
                                              check or could not be encoded

A class whose name starts with ``_`` never leaves its module. The stage rejections that
are also a ``ValueError`` keep that base for callers that validate input with it.

Outside the tree, on purpose: ``evaluator`` (standard library only, importable on its own
and a drop-in for the official command line) has its own errors, drawn in
``evaluator/errors.py``; and ``dataspace/agents/_smol_entry.py`` runs inside the sandbox
without ``dataspace`` installed, so its ``Terminated`` is a ``SystemExit`` that no
``except Exception`` of the harness swallows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class DataSpaceError(Exception):
    """Base of every error DataSpace raises on purpose."""


class ConfigError(DataSpaceError):
    """A run spec, models file, flag or environment variable is invalid."""


class SpecChangedError(ConfigError):
    """A run id is reused with a spec whose fingerprint differs."""


class RunBusyError(ConfigError):
    """Another invocation of the same run holds its lease (``dataspace.runs.lease``)."""


class ReleaseError(DataSpaceError):
    """A release folder or one of its files is malformed.

    Args:
        path: the offending file or folder.
        problem: what is wrong, in a few words.
    """

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ReplyError(DataSpaceError, ValueError):
    """A model's reply is not the JSON object asked for, or cannot be used.

    The message says what is wrong in words the model can act on: the asking loop sends it
    back as feedback (``dataspace.ask``).

    Args:
        message: what is wrong with the reply, in one line.
        raw: the reply as it goes back into the next attempt's conversation: its text, or
            the assistant message ('' when none).
    """

    def __init__(self, message: str, *, raw: str | Mapping[str, Any] = "") -> None:
        self.raw = raw
        super().__init__(message)


class ToolRefused(DataSpaceError):
    """An agent's tool call cannot be carried out; the model sees it as an error observation.

    Args:
        error_type: the exception name the official tool reports for this failure.
        message: what went wrong, in one line.
    """

    def __init__(self, error_type: str, message: str) -> None:
        self.error_type = error_type
        super().__init__(message)


class StoreError(DataSpaceError):
    """A storage backend failed."""


class NotFoundError(StoreError):
    """No object exists at the given key."""


class AlreadyExistsError(StoreError):
    """A write-once object was written a second time."""


class SandboxError(DataSpaceError):
    """The sandbox failed for reasons outside the agent's control.

    ``code`` names the failure where a backend knows it (``image_pull``, ``pod_evicted``
    ...); None otherwise.
    """

    code: str | None = None


class SandboxClosedError(SandboxError):
    """An operation was attempted on a sandbox that is already closed."""


class AgentError(DataSpaceError):
    """An agent or harness adapter failed inside the controller."""


class InfrastructureError(DataSpaceError):
    """A retryable failure: worker lost, endpoint unreachable past retries, pod evicted."""

    def __init__(self, message: str, *, code: str = "infrastructure") -> None:
        self.code = code
        super().__init__(message)


__all__ = [
    "AgentError",
    "AlreadyExistsError",
    "ConfigError",
    "DataSpaceError",
    "InfrastructureError",
    "NotFoundError",
    "ReleaseError",
    "ReplyError",
    "RunBusyError",
    "SandboxClosedError",
    "SandboxError",
    "SpecChangedError",
    "StoreError",
    "ToolRefused",
]
