"""Input encodings: map a task's conjunctions to model inputs."""

from compbench.encodings.registry import ENCODINGS, Encoded, UnknownEncodingError, encode

__all__ = ["ENCODINGS", "Encoded", "UnknownEncodingError", "encode"]
