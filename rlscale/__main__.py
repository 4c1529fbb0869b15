"""``python -m rlscale COMMAND ...``: the same as the ``rlscale`` console command."""

import sys

from rlscale.commands import main

sys.exit(main())
