"""Text as the HTML report writes it, for every section of it (reports/html_page.py,
reports/sweep_section.py): escaped (``None`` as "-"), a long name allowed to wrap at its own
joints, a table in a box that scrolls sideways."""

from __future__ import annotations

import html
import re


def esc(value: object) -> str:
    """``value`` as HTML text: escaped, ``None`` as "-"."""
    return html.escape("-" if value is None else str(value))


_BREAK_AFTER = re.compile(r"([_(/.,])(?=[^\W\d])")  # a letter or _ after it: never inside 1.28


def breakable(value: object) -> str:
    """``value`` escaped, a line break allowed after each ``_ ( / . ,`` inside a name: a long
    program or script name wraps at its own joints instead of widening its table past the page."""
    return _BREAK_AFTER.sub(r"\1<wbr>", esc(value))


def wide(table: str) -> str:
    """A table in a box of the page's width that scrolls sideways when the table needs more."""
    return f'<div class="wide">{table}</div>'
