"""``python -m dynconf``: the ``dynconf`` command, for an environment without its script."""

import sys

from dynconf.cli import main

sys.exit(main())
