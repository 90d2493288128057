"""Send and receive between two ranks: one write of the whole buffer; the receiver's is its output.
Positions: 0 the sender, 1 the receiver."""

from __future__ import annotations

from gradswitch.hosts.collectives.schedule import Schedule, Step


def send(elements: int) -> Schedule:
    return Schedule((Step(1, (0, elements), None, (0, 0)),), 0, in_place=False, output=(0, 0))


def recv(elements: int) -> Schedule:
    return Schedule((Step(None, (0, 0), 0, (0, elements)),), elements, in_place=False, output=(0, elements))
