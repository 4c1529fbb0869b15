"""`python -m rlscale.study`: the command lives in :mod:`rlscale.reports.study`."""

import sys

from rlscale.reports.study import main

if __name__ == "__main__":
    sys.exit(main())
