"""Comparing packet lists with a readable report of the first difference."""

from __future__ import annotations

from scapy.layers.l2 import Ether

import gradswitch.roce.scapy_layers  # noqa: F401  (RETH / ImmDt decoding)


def describe(pkt: bytes) -> str:
    return Ether(pkt).summary()


def diff(got: list[bytes], want: list[bytes], where: str) -> str | None:
    """None when equal, else what differs (count, first differing packet, first differing field)."""
    if got == want:
        return None
    lines = [f"{where}: got {len(got)} packets, expected {len(want)}"]
    for i, (g, w) in enumerate(zip(got, want, strict=False)):
        if g != w:
            lines.append(f"  first difference at packet {i}:")
            lines.append(f"    got      {describe(g)}")
            lines.append(f"    expected {describe(w)}")
            byte = next((j for j, (a, b) in enumerate(zip(g, w, strict=False)) if a != b), min(len(g), len(w)))
            lines.append(f"    first differing byte {byte}: got {g[byte:byte + 8].hex()} "
                         f"expected {w[byte:byte + 8].hex()}")
            break
    else:
        extra = got[len(want):] or want[len(got):]
        lines.append(f"  {'extra' if len(got) > len(want) else 'missing'}: {describe(extra[0])}")
    return "\n".join(lines)
