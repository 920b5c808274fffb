"""Names copied into human-readable outputs (README.md model cards, Mermaid/DOT labels): characters that are
invisible or reorder text on screen are shown as escapes, so a column name cannot hide or disguise what a reviewer
reads."""

from __future__ import annotations

import unicodedata

# Control (Cc: NUL, ESC, line breaks ...), format (Cf: bidi embeddings and isolates, zero-width characters),
# surrogates, private-use and unassigned code points; line and paragraph separators.
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def visible(text: str) -> str:
    """``text`` with every hidden or bidirectional-control character written as ``\\uXXXX`` (``\\UXXXXXXXX``)."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if unicodedata.category(ch) in _HIDDEN:
            code = ord(ch)
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)
