"""The command lines: ``dataspace`` and its subcommands, one module each.

Each module parses its flags into arguments of one library function, calls it and prints
what it returned; the library never prints and never parses a command line. ``root`` holds
the ``dataspace`` parser, global flags and the exit codes; ``screen`` what ``run`` and
``demo`` show while they work; ``args`` the range-checked argument types. ``install`` is
the command line of ``python -m dataspace.agents.native.install``.
"""

from dataspace.cli.root import main

__all__ = ["main"]
