"""``python -m fleetslo.cli``: the same as the ``fleetslo`` command."""

import sys

from fleetslo.cli import main

sys.exit(main())
