"""``python -m server``: same as ``runsgate``."""

import sys

from .cli.main import main

sys.exit(main())
