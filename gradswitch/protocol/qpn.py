"""gradswitch QP numbers, and the UDP source port of a QP's packets.

Every process derives its peers' QP numbers from (job, local node, remote node), so no
connection set-up exchange is needed: a QP number is
job << QPN_JOB_SHIFT | local node << QPN_NODE_SHIFT | remote node (config.p4). The switch reads
the job there (DLCP), and the UDP source port tells a (job, node) apart (TensorLights' filters).
"""

from __future__ import annotations

from gradswitch.protocol.p4_constants import CONFIG

JOB_SHIFT = CONFIG.QPN_JOB_SHIFT
NODE_SHIFT = CONFIG.QPN_NODE_SHIFT
MAX_NODES = 1 << NODE_SHIFT  # node ids are below this
MAX_JOBS = 1 << (24 - JOB_SHIFT)  # job ids are 1 .. MAX_JOBS - 1 (a QP number has 24 bits)
SOURCE_PORT_BASE = 0xC000  # RoCE NICs pick UDP source ports in 0xC000-0xFFFF...
SOURCE_PORT_BITS = 14  # ... the 14 bits below 0xC000's two


def qpn(local: int, remote: int, job: int) -> int:
    """QP number of node `local`'s QP to node `remote` in a job."""
    if not (0 <= local < MAX_NODES and 0 <= remote < MAX_NODES and 0 < job < MAX_JOBS):
        raise ValueError(f"node ids must be below {MAX_NODES} and job ids within 1..{MAX_JOBS - 1}")
    return job << JOB_SHIFT | local << NODE_SHIFT | remote


def job_of(qp: int) -> int:
    """The job a QP number belongs to (what the switch reads)."""
    return qp >> JOB_SHIFT


def udp_source_port(qp: int) -> int:
    """UDP source port of a QP's packets: SOURCE_PORT_BASE | the QP number's bits above the remote node.

    That is the low bits of the job and the local node: one port per (job, node), whichever peer
    the QP talks to, in the range RoCE NICs use.
    """
    return SOURCE_PORT_BASE | ((qp >> NODE_SHIFT) & ((1 << SOURCE_PORT_BITS) - 1))
