"""``python -m server``: same as ``runsgate``."""

import sys

from .cli import main

sys.exit(main())
