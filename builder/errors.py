"""The builder's errors: a branch of the one error tree drawn in ``dataspace.errors``.

Each stage's own rejection (``TranslationError``, ``DocumentRejected``, ...) derives from
``Rejected`` and lives beside the stage that raises it; the tree's docstring lists them all.
"""

from __future__ import annotations

from dataspace.errors import DataSpaceError


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


class EncodingError(DataSpaceError, RuntimeError):
    """ffmpeg is missing or failed; carries its last error lines."""


__all__ = ["BuildError", "EncodingError", "Rejected", "ReviewError", "SourceError"]
