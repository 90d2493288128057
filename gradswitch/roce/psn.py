"""24-bit packet sequence number arithmetic with wrap-around.

PSNs live modulo 2**24. Two PSNs are compared by their signed distance: a PSN up to 2**23
ahead is "after", up to 2**23 behind is "before" (IBTA 9.7.1 uses the same half-space
rule for the responder's valid and duplicate regions).
"""

from __future__ import annotations

PSN_BITS = 24
PSN_MOD = 1 << PSN_BITS
PSN_MASK = PSN_MOD - 1
HALF = 1 << (PSN_BITS - 1)


def psn_add(psn: int, n: int) -> int:
    return (psn + n) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """Signed distance a - b in [-2**23, 2**23)."""
    d = (a - b) & PSN_MASK
    return d - PSN_MOD if d >= HALF else d


def psn_lt(a: int, b: int) -> bool:
    return psn_diff(a, b) < 0


def psn_le(a: int, b: int) -> bool:
    return psn_diff(a, b) <= 0


def psn_range(start: int, count: int) -> list[int]:
    return [psn_add(start, i) for i in range(count)]
