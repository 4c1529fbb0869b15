"""`python -m rlscale.compare`: the command lives in :mod:`rlscale.reports.compare`."""

import sys

from rlscale.reports.compare import main

if __name__ == "__main__":
    sys.exit(main())
