"""Input encodings: render a task's conjunctions as model inputs."""

from compbench.encodings.batch import Batch
from compbench.encodings.registry import (
    ENCODINGS,
    Encoded,
    EncodingSpec,
    UnknownEncodingError,
    encode,
    encode_for_seed,
    encoding,
    follows_model_seed,
    get_encoding,
    register_encoding,
)
from compbench.encodings import images as _images  # noqa: E402,F401  (registers "images" and "digits")
from compbench.encodings import sprites as _sprites  # noqa: E402,F401  (registers "sprites")
from compbench.encodings import sequences as _sequences  # noqa: E402,F401  (registers "episodes")
from compbench.encodings import raven as _raven  # noqa: E402,F401  (registers "raven_onehot" and "raven_panels")

__all__ = [
    "Batch", "ENCODINGS", "Encoded", "EncodingSpec", "UnknownEncodingError", "encode", "encode_for_seed", "encoding",
    "follows_model_seed", "get_encoding", "register_encoding",
]
