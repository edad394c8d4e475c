"""Markdown's markers, spelled once for every reader of Markdown text (pure).

Pattern pieces, not compiled: each user anchors them and adds what it captures. The layout
chunker finds headings with them, the page renderer turns blocks into HTML, the excerpt
stripper removes the markup from chunk text.

>>> import re
>>> re.match(f"^{HEADING}(.*)$", "## Revenue").groups()
('##', 'Revenue')
>>> re.sub(IMAGE, r"\\1", "see ![the chart](c.png)")
'see the chart'
"""

from __future__ import annotations

__all__ = ["BULLET", "FENCE", "HEADING", "IMAGE", "NUMBERED", "QUOTE"]

#: An ATX heading's hashes (group 1) and the space after them.
HEADING = r"(#{1,6})\s+"
#: A bullet list item's marker and the space after it.
BULLET = r"[-*+]\s+"
#: A numbered list item's marker (``1.`` or ``1)``) and the space after it.
NUMBERED = r"\d{1,9}[.)]\s+"
#: A block quote's marker.
QUOTE = r">\s?"
#: The opening of a code fence (three or more backticks or tildes).
FENCE = r"(?:`{3,}|~{3,})"
#: An image ``![alt](src)``; group 1 is the alt text.
IMAGE = r"!\[([^\]]*)\]\([^)]*\)"
