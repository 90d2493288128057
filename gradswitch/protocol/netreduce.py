"""What NetReduce workers and the switches agree on for a job (docs/netreduce.md).

Both sides derive every number from the job id and the credit count, so nothing is
exchanged at start-up: the controller programs the switches with these values and the
workers put them in their packets.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradswitch.protocol.p4_constants import CONFIG

ELEMENTS = CONFIG.AGG_ELEMENTS_PER_PACKET  # int32 values per packet
WORDS = CONFIG.AGG_WORDS_PER_PACKET  # wide fields (register cells) per packet, AGG_WORD_BITS // 32 lanes each
LANES = CONFIG.AGG_WORD_BITS // 32  # int32 lanes of one wide field
PACKETS = CONFIG.AGG_PACKETS_PER_MESSAGE  # packets per message
PACKET_BYTES = ELEMENTS * 4
MESSAGE_ELEMENTS = ELEMENTS * PACKETS
MESSAGE_BYTES = 1 << CONFIG.AGG_MESSAGE_BYTES_LOG2
MTU = PACKET_BYTES  # the job's RoCE MTU: every packet of a message is full
DEFAULT_CREDITS = 4  # messages in flight per worker when a job does not say

assert MESSAGE_BYTES == MESSAGE_ELEMENTS * 4, "config.p4: AGG_MESSAGE_BYTES_LOG2 disagrees with the packet sizes"
assert WORDS * LANES == ELEMENTS, "config.p4: AGG_WORDS_PER_PACKET x AGG_WORD_BITS disagrees with the packet size"
assert 1 << CONFIG.AGG_PACKETS_PER_MESSAGE_LOG2 == PACKETS, "config.p4: AGG_PACKETS_PER_MESSAGE_LOG2"


OWNER_VA_SHIFT = CONFIG.NR_OWNER_VA_SHIFT  # a message's owner field: RETH.virtual_addr >> this (0: all-reduce)
assert 1 << (OWNER_VA_SHIFT - CONFIG.AGG_MESSAGE_BYTES_LOG2) >= 2 * CONFIG.AGG_MAX_CREDITS, \
    "config.p4: NR_OWNER_VA_SHIFT leaves no room for a window of 2 x AGG_MAX_CREDITS messages"
MAX_SCATTER_WORKERS = (1 << CONFIG.NR_CTX_OWNER_BITS) - 1  # owner fields 1..N must fit the per-QP context
# k of N: a result's Last packet carries the contributors' bitmap in its ImmDt from this bit, the message below it.
IMM_MEMBERS_SHIFT = CONFIG.NR_IMM_MEMBERS_SHIFT
IMM_MESSAGE_MASK = (1 << IMM_MEMBERS_SHIFT) - 1
MAX_K_OF_N_WORKERS = CONFIG.NR_KOFN_MAX_MEMBERS
assert MAX_K_OF_N_WORKERS <= 32 - IMM_MEMBERS_SHIFT, "config.p4: a k-of-N job's bitmap must fit the ImmDt"
# A deadline is compared with the switch's 32 low bits of microseconds (set_job's deadline_us): at most a minute.
MAX_DEADLINE_US = 60_000_000


@dataclass(frozen=True)
class JobLayout:
    job: int  # job id (index of the job's counters and multicast groups on the switches)
    workers: int  # N
    credits: int  # C: messages in flight per worker; the window holds 2C messages
    scatter: bool = False  # the job's messages may name an owner (reduce-scatter) as well as go to every receiver
    gather: bool = False  # ... or name an owner the other way round (all-gather: the owner sends, the others get it)
    quorum: int | None = None  # k of N: a cell's sum is emitted once this many workers are in (None: all of them)
    # k of N: ... or once this many microseconds have passed since the cell's first contribution, on the next packet
    # of one of its members (0: no deadline)
    deadline_us: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.job < CONFIG.AGG_MAX_JOBS:
            raise ValueError(f"job id {self.job} outside 1..{CONFIG.AGG_MAX_JOBS - 1}")
        if not 1 <= self.credits <= CONFIG.AGG_MAX_CREDITS:
            raise ValueError(f"credits {self.credits} outside 1..{CONFIG.AGG_MAX_CREDITS}")
        if not 2 <= self.workers <= CONFIG.AGG_MAX_MEMBERS:
            raise ValueError(f"{self.workers} workers: a NetReduce job has 2..{CONFIG.AGG_MAX_MEMBERS}")
        if self.scatter and self.gather:
            raise ValueError(f"job {self.job}: a NetReduce job reduce-scatters or all-gathers, not both "
                             "(the switch reads a message's owner one way per job): give each its own job")
        if self.owned and self.workers > MAX_SCATTER_WORKERS:
            raise ValueError(f"{self.workers} workers: a NetReduce job that reduce-scatters or all-gathers has "
                             f"2..{MAX_SCATTER_WORKERS} (the switch keeps a message's owner in 5 bits)")
        if not 0 <= self.deadline_us <= MAX_DEADLINE_US:
            raise ValueError(f"job {self.job}: a deadline of {self.deadline_us} us: give 0 (none) .. {MAX_DEADLINE_US}")
        if self.deadline_us and self.owned:
            raise ValueError(f"job {self.job}: a deadline is for all-reduce jobs, not reduce-scatter or all-gather")
        if self.deadline_us and self.workers > MAX_K_OF_N_WORKERS:
            raise ValueError(f"job {self.job}: {self.workers} workers: a job with a deadline has at most "
                             f"{MAX_K_OF_N_WORKERS} (its results name their contributors in 16 bits)")
        if self.quorum is not None:
            if not 1 <= self.quorum <= self.workers:
                raise ValueError(f"job {self.job}: k = {self.quorum} of {self.workers} workers: k is 1..{self.workers}")
            if self.k_of_n and self.workers > MAX_K_OF_N_WORKERS:
                raise ValueError(f"job {self.job}: {self.workers} workers: a k-of-N job has at most "
                                 f"{MAX_K_OF_N_WORKERS} (its results name their contributors in 16 bits)")
            if self.k_of_n and self.owned:
                raise ValueError(f"job {self.job}: k of N is for all-reduce jobs, not reduce-scatter or all-gather")

    @property
    def need(self) -> int:
        """Contributions a cell's sum waits for: k, or every worker."""
        return self.workers if self.quorum is None else self.quorum

    @property
    def k_of_n(self) -> bool:
        """The job's sums may leave workers out (k below N, or a deadline)."""
        return self.need < self.workers or self.deadline_us > 0

    def contributors(self, imm: int) -> tuple[int, ...]:
        """The ranks a k-of-N result holds, from its Last packet's ImmDt (every rank on any other job)."""
        if not self.k_of_n:
            return tuple(range(self.workers))
        bitmap = imm >> IMM_MEMBERS_SHIFT
        return tuple(r for r in range(self.workers) if bitmap >> r & 1)

    @property
    def rkey(self) -> int:
        """The job's key: in every first packet's RETH and the receivers' result region."""
        return 0x4E520000 | self.job  # "NR"

    @property
    def initial_psn(self) -> int:
        """Every job QP starts here (a multiple of PACKETS), so a message has the same PSNs on every connection."""
        return (self.job * 0x10000 + 0x100) & 0xFFFFFF & ~(PACKETS - 1)

    @property
    def window_messages(self) -> int:
        return 2 * self.credits

    @property
    def cells(self) -> int:
        """Aggregator cells the job needs on each switch (its quota)."""
        return self.window_messages * PACKETS

    def window(self, k: int) -> int:
        """Place of message k in the window: slot k mod C, shadow copy (k div C) mod 2."""
        return k % self.credits + self.credits * ((k // self.credits) % 2)

    def message_of(self, psn: int) -> int:
        """The message number the switch reads from a PSN (PSN >> AGG_PACKETS_PER_MESSAGE_LOG2, 24 bits)."""
        return psn >> CONFIG.AGG_PACKETS_PER_MESSAGE_LOG2

    def va(self, k: int) -> int:
        return self.window(k) * MESSAGE_BYTES

    @property
    def owned(self) -> bool:
        """The job's messages may name an owner (it reduce-scatters or all-gathers)."""
        return self.scatter or self.gather

    @property
    def owners(self) -> int:
        """Owner fields a first packet's RETH may carry (the switch's set_job takes it): 0 alone (all-reduce),
        or 0..N when the job reduce-scatters or all-gathers too (r + 1: rank r owns the message's shard)."""
        return self.workers + 1 if self.owned else 1

    def owner_va(self, k: int, owner: int) -> int:
        """RETH.virtual_addr of reduce-scatter (or all-gather) message k whose shard rank `owner` owns: owner + 1
        above the window index (the receivers' region holds one window per owner field, so it lands there too)."""
        if not self.owned:
            raise ValueError(f"job {self.job} neither reduce-scatters nor all-gathers: its messages go to every "
                             "receiver")
        if not 0 <= owner < self.workers:
            raise ValueError(f"owner {owner} outside 0..{self.workers - 1}")
        return (owner + 1) << OWNER_VA_SHIFT | self.va(k)

    @property
    def region_bytes(self) -> int:
        """The receivers' result region: the window, once per owner field."""
        return (self.owners - 1) * (1 << OWNER_VA_SHIFT) + self.window_messages * MESSAGE_BYTES

    def imm(self, k: int) -> int:
        """Message k's ImmDt as its sender writes it (k of N: the low bits; the switch adds the contributors)."""
        return k & (IMM_MESSAGE_MASK if self.k_of_n else 0xFFFFFFFF)

    def imm_message(self, imm: int) -> int:
        """What of a received ImmDt names the message (`imm(k)` for message k)."""
        return imm & IMM_MESSAGE_MASK if self.k_of_n else imm

    def peer(self, rank: int) -> int:
        """Worker `rank` sends its gradient on its QP to rank + 1 (mod N)."""
        return (rank + 1) % self.workers

    def sender_to(self, rank: int) -> int:
        """The worker whose connection `rank` receives its results on."""
        return (rank - 1) % self.workers

    def psn(self, k: int, i: int) -> int:
        """PSN of packet i of message k, the same on every connection of the job."""
        return (self.initial_psn + k * PACKETS + i) & 0xFFFFFF


def group_base(job: int) -> int:
    """The job's first multicast group: its results to every local receiver (or every child)."""
    return int(CONFIG.NR_GROUP_BASE + job * CONFIG.NR_GROUPS_PER_JOB)


def up_group(job: int) -> int:
    """A leaf's group that sends the job's partial sums up to its parent."""
    return group_base(job) + CONFIG.NR_GROUP_UP


def peer_group(job: int, index: int) -> int:
    """The group that answers connection (or child) `index` alone, for a retransmission."""
    return group_base(job) + CONFIG.NR_GROUP_PEER_BASE + index
