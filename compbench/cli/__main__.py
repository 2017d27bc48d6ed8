"""`python -m compbench.cli`, as the `compbench` console script."""

import sys

from compbench.cli import main

if __name__ == "__main__":  # imported (a walk over the package's modules) it runs nothing
    sys.exit(main())
