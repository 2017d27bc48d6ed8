"""`python -m compbench.cli`, as the `compbench` console script."""

import sys

from compbench.cli import main

sys.exit(main())
