"""`python -m rlscale.plan`: the command lives in :mod:`rlscale.reports.plan`."""

import sys

from rlscale.reports.plan import main

if __name__ == "__main__":
    sys.exit(main())
