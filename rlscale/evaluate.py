"""`python -m rlscale.evaluate`: the command lives in :mod:`rlscale.reports.evaluate`."""

import sys

from rlscale.reports.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
