"""``python -m rlgate.cli``: the same as the ``rlgate`` command."""

import sys

from rlgate.cli.app import main

sys.exit(main())
