"""The command lines: ``dataspace`` and its subcommands, one module each.

Each module parses its flags into arguments of one library function, calls it and prints
what it returned; the library never prints and never parses a command line. ``root`` holds
the ``dataspace`` parser, global flags and the exit codes; ``screen`` what ``run`` and
``demo`` show while they work; ``args`` the range-checked argument types. Two command
lines run as ``python -m`` of the module they serve: ``install`` (``python -m
dataspace.agents.native.install``) and ``scripted_server`` (``python -m
dataspace.testing.scripted_server``, the one module here that reaches the test fakes; the
``dataspace`` command never imports it).
"""

from dataspace.cli.root import main

__all__ = ["main"]
