"""The class a DLCP packet carries in BTH.resv7 (docs/dlcp.md).

resv7 = droppable << DLCP_DROPPABLE_SHIFT | layer class << DLCP_LAYER_SHIFT
        | magnitude class << DLCP_MAGNITUDE_SHIFT [| TRIMMED]
(config.p4). The hosts mark their packets with `marking`; the switch reads the droppable bit
itself and matches the classes with the controller's ternary rules (`layer_match`, `magnitude_match`).
The switch sets TRIMMED (bit DLCP_TRIMMED_SHIFT, which no host sets) on a packet whose payload its
selective drop cut: the packet arrives as its headers alone, a drop notification (docs/dlcp.md).
"""

from __future__ import annotations

from gradswitch.protocol.p4_constants import CONFIG

LAYER_CLASSES = CONFIG.DLCP_LAYER_CLASSES
MAGNITUDE_CLASSES = CONFIG.DLCP_MAGNITUDE_CLASSES
DROPPABLE = 1 << CONFIG.DLCP_DROPPABLE_SHIFT  # the droppable bit of resv7
LAYER_MASK = (LAYER_CLASSES - 1) << CONFIG.DLCP_LAYER_SHIFT
MAGNITUDE_MASK = (MAGNITUDE_CLASSES - 1) << CONFIG.DLCP_MAGNITUDE_SHIFT
TRIMMED = 1 << CONFIG.DLCP_TRIMMED_SHIFT  # set by a switch that cut the packet's payload (a drop notification)


def marking(droppable: bool, layer_class: int, magnitude_class: int) -> int:
    """The 7-bit BTH.resv7 value of a packet's class."""
    if not (0 <= layer_class < LAYER_CLASSES and 0 <= magnitude_class < MAGNITUDE_CLASSES):
        raise ValueError(f"class out of range: layer {layer_class} (0..{LAYER_CLASSES - 1}), "
                         f"magnitude {magnitude_class} (0..{MAGNITUDE_CLASSES - 1})")
    return (DROPPABLE if droppable else 0) | layer_class << CONFIG.DLCP_LAYER_SHIFT \
        | magnitude_class << CONFIG.DLCP_MAGNITUDE_SHIFT


def layer_match(layer_class: int) -> tuple[int, int]:
    """(value, mask) of resv7 for every packet of a layer class."""
    return marking(False, layer_class, 0), LAYER_MASK


def layer_magnitude_match(layer_class: int, magnitude_class: int) -> tuple[int, int]:
    """(value, mask) of resv7 for the packets of a layer class and a magnitude class."""
    return marking(False, layer_class, magnitude_class), LAYER_MASK | MAGNITUDE_MASK


def default_thresholds(mbps: float) -> dict[int, int]:
    """Low priorities (0-2) drop at 10 ms of queue at the link rate (at least 16 KiB), middle ones
    (3-5) at 25 ms (at least 32 KiB), the top two never: well below the ~100 ms (64 KiB at least)
    byte FIFO of a shaped port, and above the bursts BMv2 itself makes (it forwards in batches,
    so a few packets arriving together are not yet congestion)."""
    per_ms = mbps * 1e6 / 8 / 1000
    return {p: max(16 << 10, int(per_ms * 10)) if p < 3 else max(32 << 10, int(per_ms * 25)) for p in range(6)}
