"""A 'plugin' module that calls sys.exit(0) at import (tests/test_registry.py): it must be reported, not obeyed."""

import sys

sys.exit(0)
