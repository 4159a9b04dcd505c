"""DNS-safe labels for zones and tool slugs derived from free text."""

from __future__ import annotations

import re

_LABEL_BAD = re.compile(r"[^a-z0-9-]+")
ZONE_LABEL_MAX = 62  # a cursor prefixes "_" to a zone's label (``_mcp._tcp._<zone>``)


def dns_label(text: str, fallback: str = "x", max_len: int = 63) -> str:
    """A DNS-safe label (``[a-z0-9-]``, 1–``max_len`` characters) derived from ``text``.
    Zone labels use ``max_len=ZONE_LABEL_MAX`` so that cursor names still fit."""
    label = _LABEL_BAD.sub("-", text.lower()).strip("-")[:max_len].strip("-")
    return label or fallback


def zone_label(text: str, fallback: str = "x") -> str:
    """A label for a zone: :func:`dns_label` short enough for the cursor's ``_`` prefix."""
    return dns_label(text, fallback, ZONE_LABEL_MAX)
