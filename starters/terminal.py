"""Text from runs on a terminal: what a model wrote is shown, never obeyed.

A plan title, a question, a tool's arguments or result may hold rich markup (`[/]` would
crash a table, `[conceal]` hide part of an argument from the approver) or terminal escape
sequences (clear the screen, retitle the window, move the cursor over a line). `shown()`
makes such text a plain `Text` with the sequences and control characters taken out, for
table cells and lines; `SafeConsole` strips them from everything it writes, whatever
slipped through, keeping the colours rich itself adds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

# CSI and OSC sequences, two-character escapes, and the C0/C1 controls but tab and newline.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, screen clears
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
    r"|\x1b[@-Z\\-_]"  # other two-character escapes
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # the rest of C0 and C1, DEL
)


def stripped(text: str) -> str:
    return _ESCAPES.sub("", text)


def shown(value: Any) -> Text:
    """A value from a run as plain text: no markup read, no escape sequence kept."""
    return Text(stripped(str(value)))


class SafeConsole(Console):
    """A rich console that writes no escape sequence or control character it did not make."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and segment.text:
                clean = stripped(segment.text)
                if clean != segment.text:
                    segment = Segment(clean, segment.style, segment.control)
            yield segment
