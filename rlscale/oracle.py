"""`python -m rlscale.oracle`: the command lives in :mod:`rlscale.reports.oracle`."""

import sys

from rlscale.reports.oracle import main

if __name__ == "__main__":
    sys.exit(main())
