"""The ``local`` sandbox backend: namespaces, a private root and cgroups on this host.

``backend.py`` holds the backend and its sandboxes (its docstring tells the design); the
private modules are its parts: ``_init.py`` (the sandbox's PID 1), ``_cgroup.py`` (limits),
``_seccomp.py`` (the syscall filter), ``_procs.py`` (process helpers), ``_etc.py`` (the
workbench's ``/etc``). ``confine.py`` runs host helpers under a cgroup of their own, beside
the sandboxes' groups.
"""

from __future__ import annotations

from dataspace.sandbox.local.backend import (
    Enforcement,
    LocalBackend,
    LocalSandbox,
    machine_memory_bytes,
)

__all__ = ["Enforcement", "LocalBackend", "LocalSandbox", "machine_memory_bytes"]
