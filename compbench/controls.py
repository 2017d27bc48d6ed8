"""Terminal control sequences taken out of text compbench did not write: a model's error message, a suite's description.

Such text is printed to terminals and written into reports people `cat`; an escape sequence in it
would be obeyed there (retitle the window, recolour or clear the screen, hide the lines before it).
Standard library only: the records, the reports and the CLI all import it.
"""

from __future__ import annotations

import re

# Whole sequences go (their parameters are no words a reader would see): CSI (ESC [ or C1 0x9b),
# string commands ended by BEL or ST (OSC, DCS, SOS, PM, APC: ESC ] P X ^ _ or C1), the other
# ESC sequences; then any C0 or C1 control left but line feed and tab (a lone ESC, BEL, CR, DEL).
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def strip_controls(text: str) -> str:
    """`text` without terminal control sequences and C0/C1 control characters (line feeds and tabs kept)."""
    return _SEQUENCE.sub("", text)
