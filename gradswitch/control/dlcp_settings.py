"""DLCP at run time on every switch of a fabric: the RoCE class, a job's features, the drop thresholds,
the events.

The entries themselves are built by gradswitch/control/controls/dlcp.py; this is what the REPL's
`dlcp` command and the experiment runner change while traffic runs.
"""

from __future__ import annotations

from gradswitch.control.controls import dlcp
from gradswitch.control.controls.dlcp import Features
from gradswitch.control.fabric import Fabric
from gradswitch.control.p4rt import SwitchSession
from gradswitch.protocol.dlcp import default_thresholds
from gradswitch.protocol.p4_constants import CONFIG


class DlcpSettings:
    """DLCP's state on every switch of one fabric."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric

    def set(self, job: int, priority: bool | None = None, drop: bool | None = None, spray: bool | None = None,
            switches: list[str] | None = None) -> Features:
        """Switch DLCP's features of a job on or off on every switch (a feature not given keeps its
        state; all off when nothing is given); installs the job's class mapping the first time.
        Returns what is now on."""
        dlcp.check_job(job)
        names = switches or self.fabric.switch_names()
        current = self._features(self.fabric.session(names[0]), job)
        if priority is None and drop is None and spray is None:
            features = Features()
        else:
            features = Features(current.priority if priority is None else priority,
                                current.drop if drop is None else drop,
                                current.spray if spray is None else spray)
        entry = dlcp.features_entry(job, features)
        for name in names:
            sess = self.fabric.session(name)
            if any(e.match.get("meta.dlcp.job") == job for e in sess.read_table(dlcp.JOBS)):
                sess.modify([entry])
            else:
                sess.insert([entry, *dlcp.default_classes(job)])
        return features

    def set_roce_class(self, on: bool) -> bool:
        """Put every RoCE v2 packet in one strict-priority class above bulk traffic (ROCE_CLASS_PRIORITY) on
        every switch, or take it out again; a DLCP job with priority on keeps its own classes. Returns what is
        now on."""
        entry = dlcp.roce_class_entry()
        for name in self.fabric.switch_names():
            sess = self.fabric.session(name)
            installed = bool(sess.read_table(dlcp.ROCE_CLASS))
            if on and not installed:
                sess.insert([entry])
            elif installed and not on:
                sess.delete([entry])
        return on

    def roce_class(self) -> bool:
        """Whether the RoCE class is on (as the first switch holds it; `set_roce_class` keeps every switch the same)."""
        return bool(self.fabric.session(self.fabric.switch_names()[0]).read_table(dlcp.ROCE_CLASS))

    def features(self, job: int) -> Features:
        """What is on for a job (as the first switch holds it; `set` keeps every switch the same)."""
        return self._features(self.fabric.session(self.fabric.switch_names()[0]), job)

    @staticmethod
    def _features(sess: SwitchSession, job: int) -> Features:
        for e in sess.read_table(dlcp.JOBS):
            if e.match.get("meta.dlcp.job") == job:
                return Features(*(bool(e.params[k]) for k in ("priority", "drop", "spray")))
        return Features()

    def set_thresholds(self, thresholds: dict[int, int] | None = None, keep_others: bool = False
                       ) -> dict[str, dict[int, int]]:
        """Set the selective-drop thresholds (priority -> virtual-queue bytes) on every switch with
        shaped ports; None restores the defaults for each switch's link rate; with keep_others, the
        priorities not given keep each switch's own. Returns what is set."""
        out: dict[str, dict[int, int]] = {}
        for name in self.fabric.switch_names():
            rate = self.fabric.topo.slowest_link_mbps(name)
            if rate is None:
                continue
            sess = self.fabric.session(name)
            installed = {dlcp.threshold_priority(e): e for e in sess.read_table(dlcp.THRESHOLDS)}
            if thresholds is None:
                wanted = default_thresholds(rate)
            elif keep_others:
                wanted = {**{p: int(e.params["bytes"]) for p, e in installed.items()}, **thresholds}
            else:
                wanted = thresholds
            entries = dlcp.threshold_entries(wanted)
            for write, batch in ((sess.modify, [e for e in entries if dlcp.threshold_priority(e) in installed]),
                                 (sess.insert, [e for e in entries if dlcp.threshold_priority(e) not in installed]),
                                 (sess.delete, [e for p, e in installed.items() if p not in wanted])):
                if batch:
                    write(batch)
            out[name] = dict(wanted)
        return out

    def thresholds(self, switch: str) -> dict[int, int]:
        """The selective-drop thresholds installed on a switch: priority -> bytes."""
        return {dlcp.threshold_priority(e): int(e.params["bytes"])
                for e in self.fabric.session(switch).read_table(dlcp.THRESHOLDS)}

    def trimmed(self, switch: str) -> int:
        """Packets whose payload the switch dropped (DLCP's selective drop: their headers went on, trimmed), all
        jobs together."""
        cells = self.fabric.read_counter(switch, dlcp.EVENTS)
        return sum(c.packets for i, c in cells.items() if i % CONFIG.DLCP_EVENTS == CONFIG.DLCP_EV_DROPPED)

    def events(self, switch: str, job: int) -> dict[str, int]:
        """A job's DLCP event counters on a switch (classified, kept, dropped), by name."""
        cells = self.fabric.read_counter(switch, dlcp.EVENTS)
        base = job * CONFIG.DLCP_EVENTS
        return {name: cells[base + i].packets for i, name in dlcp.event_names().items() if base + i in cells}
