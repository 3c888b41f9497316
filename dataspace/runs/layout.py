"""Where a run's files live in the store (DESIGN.md "Run").

::

    runs/<run_id>/spec.json
    runs/<run_id>/order.json         (the order of the pending attempts, each invocation)
    runs/<run_id>/plan.json          (the estimate, recorded at the first start: runs.plan)
    runs/<run_id>/attempts/<agent>/<task>/<n>/{events.jsonl, run.json,
                                               output/prediction.csv, result.json}
    runs/<run_id>/attempts/<agent>/<task>/<n>/infra/try_<k>.json   (retried faults)
    runs/<run_id>/attempts/<agent>/<task>/<n>/usage/<try_id>.json  (each try's spend so far)
    runs/<run_id>/tries/<agent>/<task>/<n>/try_<k>/...   (a finished try rerun by --retry)
    runs/<run_id>/lease/<generation>.json               (the live invocation, runs.lease)
    runs/<run_id>/predictions/<agent>/task_N/prediction.csv          (attempt 1)
    runs/<run_id>/predictions/<agent>/attempt_<n>/task_N/prediction.csv  (n > 1)
    runs/<run_id>/{results.parquet, summary.json, report.md, report.html}
    runs/<run_id>/results/part-<first>-<last>.parquet   (rows since results.parquet:
                                                         runs.results_log)

``result.json`` is written last: an attempt is finished exactly when it exists.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class RunLayout:
    """Key builder for one run."""

    run_id: str

    @property
    def prefix(self) -> str:
        """``runs/<run_id>``."""
        return f"runs/{self.run_id}"

    def key(self, name: str) -> str:
        """A run-level file, e.g. ``summary.json``."""
        return f"{self.prefix}/{name}"

    def attempt(self, agent: str, task: str, n: int) -> str:
        """Folder of one attempt."""
        return f"{self.prefix}/attempts/{agent}/{task}/{n}"

    def infra(self, agent: str, task: str, n: int, k: int) -> str:
        """Record of the k-th infrastructure failure of an attempt."""
        return f"{self.attempt(agent, task, n)}/infra/try_{k}.json"

    def usage(self, agent: str, task: str, n: int, try_id: str) -> str:
        """The usage journal of one try of an attempt (rewritten after each model call)."""
        return f"{self.attempt(agent, task, n)}/usage/{try_id}.json"

    def tried(self, agent: str, task: str, n: int, k: int) -> str:
        """Folder keeping the files of try ``k`` of an attempt that was rerun (``--retry``).

        >>> RunLayout(run_id="r").tried("a", "task_1", 1, 0)
        'runs/r/tries/a/task_1/1/try_0'
        """
        return f"{self.prefix}/tries/{agent}/{task}/{n}/try_{k}"

    def prediction(self, agent: str, task: str, n: int) -> str:
        """The evaluator-ready copy of a prediction.

        >>> RunLayout(run_id="r").prediction("gold", "task_3", 1)
        'runs/r/predictions/gold/task_3/prediction.csv'
        >>> RunLayout(run_id="r").prediction("gold", "task_3", 2)
        'runs/r/predictions/gold/attempt_2/task_3/prediction.csv'
        """
        base = f"{self.prefix}/predictions/{agent}"
        if n > 1:
            base += f"/attempt_{n}"
        return f"{base}/{task}/prediction.csv"


__all__ = ["RunLayout"]
