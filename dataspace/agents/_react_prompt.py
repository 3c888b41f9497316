"""The prompt contract of DataSpace-Agent, word for word as the paper's baseline runs it.

Changing any text here changes results: ``PROMPT_SHA256`` is recorded in every trace so
runs made under another wording can be told apart.
"""

from __future__ import annotations

import hashlib

PROMPT_CONTRACT_VERSION = "dataspace-agent-v2"

SYSTEM_PROMPT = """You are a data agent operating in an isolated task workspace.

Solve the user's analytical question using only the files under /workspace.
The workspace is read-only. Store scripts, intermediate files, rendered PDF
pages, extracted video frames, and the final answer under /output.

You have exactly three tools:
1. bash for low-level filesystem inspection and data processing;
2. view_image for inspecting one image that you selected or rendered;
3. submit_answer for submitting a final rectangular CSV under /output.

Use bash with standard command-line tools and Python for CSV, JSON, SQLite,
Markdown, PDF, and video processing. Decide which files, pages, and timestamps
to inspect. The tools do not perform semantic retrieval or task-specific
reasoning for you.

The preinstalled generic utilities are documented at
/opt/dataspace/TOOLS.md. Package installation and Internet access are
unavailable.

Return the complete requested relation, not an explanation. CSV header names
need not match hidden reference names, but the data columns and rows must have
the intended semantics. Do not end the run until the exact file
/output/prediction.csv exists and you have called submit_answer on that file.
Verify the CSV is readable and rectangular before submitting it. A prose
answer or a differently named file is not a submission."""

PROMPT_SHA256 = hashlib.sha256(SYSTEM_PROMPT.encode("utf-8")).hexdigest()

REMINDER = "Continue by calling one of the available tools. The run ends only after submit_answer."

IMAGE_NOTE = "Visual observation returned by view_image for {path}. Analyze the pixels directly."


def task_message(task_id: str, question: str) -> str:
    """The first user message.

    >>> print(task_message("task_1", "How many?").splitlines()[0])
    Task ID: task_1
    """
    return (
        f"Task ID: {task_id}\n"
        f"Question: {question}\n\n"
        "Inspect /workspace. Before ending, write the complete relation to the exact path "
        "/output/prediction.csv, verify it, and call submit_answer on that file."
    )


def time_note(seconds: float) -> str:
    """How the agent is told its remaining wall-clock time.

    >>> time_note(75.4)
    'Time remaining: 75 s of the wall-clock budget.'
    """
    return f"Time remaining: {max(0, int(seconds))} s of the wall-clock budget."


__all__ = [
    "IMAGE_NOTE",
    "PROMPT_CONTRACT_VERSION",
    "PROMPT_SHA256",
    "REMINDER",
    "SYSTEM_PROMPT",
    "task_message",
    "time_note",
]
