"""Run the command line with ``python -m lessonledger.ops``."""

import sys

from lessonledger.ops.cli import main

sys.exit(main())
