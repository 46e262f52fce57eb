"""`python -m pyhalide`: the command line (autoscheduler.cli: tune, records, demo)."""

import sys

from autoscheduler.cli import main

sys.exit(main())
