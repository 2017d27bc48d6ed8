"""compbench: benchmark compositional generalization against the kernel theory."""

__version__ = "0.1.0"
