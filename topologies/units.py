"""Quantities with units as topology files and scenarios write them: durations
(``"10ms"``), bandwidths (``"100Mbps"``) and loss probabilities (``"1%"``)."""

from __future__ import annotations

import math
import numbers
import re

_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([-+]?[0-9]+))?"
_QUANTITY = re.compile(rf"^\s*{_NUMBER}\s*([A-Za-zµμ/%]*)\s*$")
_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "secs": 1.0, "ms": 1e-3, "us": 1e-6,
               "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_SI = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_RATE = re.compile(r"^([kKmMgGtT]?)(bps|bit/s|bits/s|b/s|Bps|B/s|byte/s|bytes/s)?$")


def _split(value: str) -> tuple[float, str] | None:
    m = _QUANTITY.match(value)
    if not m:
        return None
    number = float(m.group(1) + (f"e{m.group(2)}" if m.group(2) else ""))
    return number, m.group(3)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def parse_duration(value: object) -> float:
    """Seconds from a number (seconds) or a string like ``"10ms"``, ``"1.5 ms"``, ``"0.2s"``,
    ``"250us"``; raises ValueError."""
    x = _number(value)
    if x is None:
        parts = _split(value) if isinstance(value, str) else None
        if parts is None or parts[1].lower() not in _TIME_UNITS:
            raise ValueError(f"not a duration: {value!r} (use seconds or e.g. '10ms', '0.2s')")
        x = parts[0] * _TIME_UNITS[parts[1].lower()]
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"a duration must be finite and ≥ 0, got {value!r}")
    return x


def parse_bandwidth(value: object) -> float:
    """Bits per second from a number (bits/s) or a string like ``"100Mbps"``, ``"1Gbps"``,
    ``"10 Mbit/s"`` (``"MBps"``/``"MB/s"`` are bytes/s); raises ValueError."""
    x = _number(value)
    if x is None:
        parts = _split(value) if isinstance(value, str) else None
        m = _RATE.match(parts[1]) if parts is not None else None
        if parts is None or m is None or (m.group(1) and not m.group(2)):
            raise ValueError(f"not a bandwidth: {value!r} (use bits/s or e.g. '100Mbps', "
                             f"'1Gbps')")
        unit = m.group(2) or "bps"
        x = parts[0] * _SI[m.group(1).lower()] * (8.0 if unit[0] == "B" else 1.0)
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"a bandwidth must be finite and > 0, got {value!r}")
    return x


def parse_loss(value: object) -> float:
    """A loss probability in [0, 1) from a number or a string (``"0.01"``, ``"1%"``)."""
    x = _number(value)
    if x is None:
        parts = _split(value) if isinstance(value, str) else None
        if parts is None or parts[1] not in ("", "%"):
            raise ValueError(f"not a loss probability: {value!r} (use e.g. 0.01 or '1%')")
        x = parts[0] / (100.0 if parts[1] == "%" else 1.0)
    if not math.isfinite(x) or not 0 <= x < 1:
        raise ValueError(f"a loss probability must be in [0, 1), got {value!r}")
    return x
