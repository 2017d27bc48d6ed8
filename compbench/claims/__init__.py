"""Claims: the theory's statements as registered, typed objects that judge scored records.

A suite's expectation names a claim (`claim: at_chance`) and gives its parameters; the claim says
which task kinds and metrics it applies to (checked by `compbench validate`) and turns records
into verdicts. Third parties add claims through the `compbench.claims` entry-point group.
"""

from compbench.claims.base import CLAIMS, Claim, ClaimParams, Verdict, get_claim, register_claim
from compbench.claims import builtin as _builtin  # noqa: F401,E402  (registers the built-in claims)

__all__ = ["CLAIMS", "Claim", "ClaimParams", "Verdict", "get_claim", "register_claim"]
