"""Training loops, including vectorised multi-seed training of small networks."""
