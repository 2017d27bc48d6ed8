"""Runner: expands a suite into cells, runs what is not cached, stores records as they finish."""
