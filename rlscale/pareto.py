"""`python -m rlscale.pareto`: the command lives in :mod:`rlscale.reports.pareto`."""

import sys

from rlscale.reports.pareto import main

if __name__ == "__main__":
    sys.exit(main())
