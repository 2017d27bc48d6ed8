"""`python -m compbench`: the same command as the `compbench` console script."""

import sys

from compbench.cli import main

sys.exit(main())
