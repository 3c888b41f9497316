"""The one error tree of DataSpace.

Every error carries the context a user needs (a path, a task id, a backend) and says how to
fix the problem when there is something to fix. The CLI prints ``str(error)`` as one line.

::

    DataSpaceError
    ├── ConfigError              bad run spec, models file, flags or environment
    │   ├── SpecChangedError     same run id, different spec fingerprint
    │   └── RunBusyError         another live invocation holds the run's lease
    ├── ReleaseError             a release folder or one of its files is malformed
    ├── SourceError              a Text-to-SQL source item or database is unusable
    ├── BuildError               a builder stage rejected an item (carries stage + reason)
    ├── StoreError               storage backend failure
    │   ├── NotFoundError        no object at that key
    │   └── AlreadyExistsError   write-once object written twice
    ├── SandboxError             the sandbox itself failed (infrastructure, never the agent)
    │   └── SandboxClosedError   operation on a closed sandbox
    ├── AgentError               an agent/harness misbehaved in the controller
    ├── ReviewError              a review request breaks the protocol (carries an HTTP status)
    └── InfrastructureError      a retryable failure outside the agent's control
"""

from __future__ import annotations


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


class ReviewError(DataSpaceError):
    """A review request is refused: bad input, wrong role, wrong phase or a locked record.

    Args:
        message: what is wrong and how to fix it.
        status: the HTTP status the review server answers with (400, 403, 404, 409).
    """

    def __init__(self, message: str, *, status: int = 400) -> None:
        self.status = status
        super().__init__(message)


class SourceError(DataSpaceError):
    """A Text-to-SQL source item or its database cannot be used."""

    def __init__(self, where: object, problem: str) -> None:
        self.where = str(where)
        self.problem = problem
        super().__init__(f"{self.where}: {problem}")


class BuildError(DataSpaceError):
    """A builder stage rejected one item.

    Args:
        item: the source item id.
        stage: the stage that rejected it (``load``, ``transform``, ``fluency``, ``sample``,
            ``gold``, ``semantics``, ``render``, ``video``, ``config``).
        reason: why, in one line.
    """

    def __init__(self, item: str, stage: str, reason: str) -> None:
        self.item = item
        self.stage = stage
        self.reason = reason
        super().__init__(f"{item}: rejected at {stage}: {reason}")


class Rejected(BuildError):
    """A builder stage refused the item it was working on (raised inside a stage).

    The stage knows why but not always which item: the driver records it with the item's
    id. ``str()`` is the reason alone until an item is attached.

    Args:
        reason: why, in one line.
        stage: the stage (default: the class's ``stage_name``).
        item: the source item id, when known.
    """

    stage_name = "build"

    def __init__(self, reason: str = "", *, stage: str | None = None, item: str = "") -> None:
        super().__init__(item, stage or type(self).stage_name, reason)

    def __str__(self) -> str:
        return self.reason if not self.item else super().__str__()


class StoreError(DataSpaceError):
    """A storage backend failed."""


class NotFoundError(StoreError):
    """No object exists at the given key."""


class AlreadyExistsError(StoreError):
    """A write-once object was written a second time."""


class SandboxError(DataSpaceError):
    """The sandbox failed for reasons outside the agent's control."""


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
    "BuildError",
    "ConfigError",
    "DataSpaceError",
    "InfrastructureError",
    "NotFoundError",
    "ReleaseError",
    "RunBusyError",
    "SandboxClosedError",
    "SandboxError",
    "SourceError",
    "SpecChangedError",
    "StoreError",
]
