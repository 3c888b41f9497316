"""``python -m dataspace.cli``: the ``dataspace`` command."""

import sys

from dataspace.cli import main

sys.exit(main())
