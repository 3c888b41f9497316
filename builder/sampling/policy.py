"""The sampling policy ψ = (seed, soft budgets, attempts K, anchor table, extra relationships).

Budgets bound ordinary random additions only: protected rows and rows brought in by
relational closure take precedence and may exceed them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dataspace.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class Relationship:
    """A relationship the schema does not declare: child(columns) -> parent(columns)."""

    child: str
    child_columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Relationship:
        """Read ``child(a, b) -> parent(x, y)``.

        >>> Relationship.parse("cost(event_id) -> labevents(row_id)").parent_columns
        ('row_id',)
        """
        import re

        m = re.fullmatch(r"\s*(\w+)\s*\(([^)]*)\)\s*->\s*(\w+)\s*\(([^)]*)\)\s*", text)
        if not m:
            raise ConfigError(f"relationship {text!r} must look like child(a) -> parent(b)")
        child_cols = tuple(c.strip() for c in m.group(2).split(",") if c.strip())
        parent_cols = tuple(c.strip() for c in m.group(4).split(",") if c.strip())
        if not child_cols or len(child_cols) != len(parent_cols):
            raise ConfigError(f"relationship {text!r}: column lists must have equal length")
        return cls(
            child=m.group(1),
            child_columns=child_cols,
            parent=m.group(3),
            parent_columns=parent_cols,
        )


@dataclass(frozen=True, kw_only=True)
class SamplingPolicy:
    """How one task database is sampled.

    Attributes:
        seed: base random seed; attempt k uses ``attempt_seed(k)``.
        budget: default soft row budget per table.
        budgets: per-table budgets overriding ``budget``.
        attempts: maximum attempts K.
        anchor_table: optional table whose sampled rows start relationship propagation.
        extra_relationships: relationships the schema does not declare.
        anchor_cap: most witness rows kept per query block on the first attempt (doubled on
            each retry; the rows are drawn with the attempt's seed).
        join_fanout: most matched rows added per protected row along a query join path.
        connected_fill: fill child tables first with rows whose parents are already
            selected (bounded one-to-many expansion), then uniformly.
        strict_foreign_keys: treat references that already dangle in the source database as
            errors too (by default they are counted in the ledger).
    """

    seed: int = 0
    budget: int = 200
    budgets: Mapping[str, int] = field(default_factory=dict)
    attempts: int = 3
    anchor_table: str | None = None
    extra_relationships: tuple[Relationship, ...] = ()
    anchor_cap: int = 400
    join_fanout: int = 3
    connected_fill: bool = True
    strict_foreign_keys: bool = False

    def __post_init__(self) -> None:
        if self.budget < 0 or any(b < 0 for b in self.budgets.values()):
            raise ConfigError("sampling budgets must be >= 0")
        if self.attempts < 1:
            raise ConfigError("sampling attempts must be >= 1")
        if self.anchor_cap < 1 or self.join_fanout < 1:
            raise ConfigError("anchor_cap and join_fanout must be >= 1")

    def budget_for(self, table: str) -> int:
        """The soft budget of ``table``.

        >>> SamplingPolicy(budget=50, budgets={"Big": 10}).budget_for("big")
        10
        """
        low = table.lower()
        for name, b in self.budgets.items():
            if name.lower() == low:
                return int(b)
        return self.budget

    def attempt_seed(self, attempt: int) -> int:
        """The seed of attempt ``attempt`` (1-based), derived from ``seed``.

        >>> SamplingPolicy(seed=7).attempt_seed(1) == SamplingPolicy(seed=7).attempt_seed(1)
        True
        """
        digest = hashlib.sha256(f"{self.seed}:{attempt}".encode()).hexdigest()
        return int(digest[:12], 16)

    def cap_for(self, attempt: int) -> int:
        """Witness rows kept per query block at ``attempt``."""
        return self.anchor_cap * (2 ** (attempt - 1))

    def to_json(self) -> dict[str, Any]:
        """JSON-ready record for the ledger."""
        return {
            "seed": self.seed,
            "budget": self.budget,
            "budgets": dict(self.budgets),
            "attempts": self.attempts,
            "anchor_table": self.anchor_table,
            "extra_relationships": [
                f"{r.child}({', '.join(r.child_columns)}) -> "
                f"{r.parent}({', '.join(r.parent_columns)})"
                for r in self.extra_relationships
            ],
            "anchor_cap": self.anchor_cap,
            "join_fanout": self.join_fanout,
            "connected_fill": self.connected_fill,
            "strict_foreign_keys": self.strict_foreign_keys,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SamplingPolicy:
        """Read a policy from a config mapping (unknown keys are refused)."""
        known = {f for f in cls.__dataclass_fields__}
        extra = set(obj) - known
        if extra:
            raise ConfigError(f"unknown sampling options {sorted(extra)}; known: {sorted(known)}")
        kwargs = dict(obj)
        rels = kwargs.pop("extra_relationships", ()) or ()
        kwargs["extra_relationships"] = tuple(
            r if isinstance(r, Relationship) else Relationship.parse(str(r)) for r in rels
        )
        if "budgets" in kwargs:
            kwargs["budgets"] = dict(kwargs["budgets"] or {})
        return cls(**kwargs)


__all__ = ["Relationship", "SamplingPolicy"]
