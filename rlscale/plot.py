"""`python -m rlscale.plot`: the command lives in :mod:`rlscale.reports.plot`."""

import sys

from rlscale.reports.plot import main

if __name__ == "__main__":
    sys.exit(main())
