"""What a fault did to a run, as both backends report it (results.json's `faults`): when it was injected, when the
control plane (or the job) noticed, when traffic flowed again, what followed, and the iterations it cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradswitch.protocol.choice import Choice
from gradswitch.topology.faults import Fault, fault_from_dict


class FaultOutcome(Choice):
    RECOVERED = "recovered"  # the job went on: rerouted, restarted, fell back, rode through on retransmission
    INTERRUPTED = "interrupted"  # the job stopped there: the iterations completed before it are kept
    NO_EFFECT = "no-effect"  # nothing of the job crossed it (a link or switch the job's traffic did not use), or it
    # was never injected (FaultRecord.not_injected says why)


@dataclass(frozen=True)
class FaultRecord:
    fault: Fault
    injected_s: float  # when it happened, seconds after the jobs' start (the fault's at_s, as carried out)
    outcome: FaultOutcome
    detected_s: float | None = None  # when the control plane or the job noticed (None: never)
    recovered_s: float | None = None  # when the job's traffic flowed again (rerouted, restarted, fell back)
    iterations_lost: int = 0  # iterations started and not completed because of it (redone, or never done)
    fallback: str | None = None  # what the job fell back to, e.g. "ring" for NetReduce reductions it hit
    detail: str = ""  # one line: what followed, for a person
    job_stopped_s: float | None = None  # interrupted: when the job's last node was gone (None: not measured)
    # Why the fault was not injected (None: it was): its time came after the jobs had ended, or its mechanism
    # failed (the kill or SIGSTOP refused, the switch already gone). A fault not injected is no-effect, never
    # recovered nor interrupted: nothing of what the job did follows from it.
    not_injected: str | None = None

    def __post_init__(self) -> None:
        if self.not_injected is not None and self.outcome != FaultOutcome.NO_EFFECT:
            raise ValueError(f"fault {self.fault.label}: not injected ({self.not_injected}), so no-effect, not "
                             f"{self.outcome}")

    @property
    def injected(self) -> bool:
        return self.not_injected is None

    @property
    def time_to_detect_s(self) -> float | None:
        return None if self.detected_s is None else self.detected_s - self.injected_s

    @property
    def time_to_recover_s(self) -> float | None:
        return None if self.recovered_s is None else self.recovered_s - self.injected_s

    def to_dict(self) -> dict[str, Any]:
        return {"fault": self.fault.to_dict(), "label": self.fault.label, "injected_s": self.injected_s,
                "outcome": str(self.outcome), "detected_s": self.detected_s, "recovered_s": self.recovered_s,
                "time_to_detect_s": self.time_to_detect_s, "time_to_recover_s": self.time_to_recover_s,
                "iterations_lost": self.iterations_lost, "fallback": self.fallback, "detail": self.detail,
                "job_stopped_s": self.job_stopped_s, "injected": self.injected, "not_injected": self.not_injected}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> FaultRecord:
        return cls(fault_from_dict(raw["fault"]), float(raw["injected_s"]), FaultOutcome(raw["outcome"]),
                   raw.get("detected_s"), raw.get("recovered_s"), int(raw.get("iterations_lost", 0)),
                   raw.get("fallback"), str(raw.get("detail", "")), raw.get("job_stopped_s"),
                   raw.get("not_injected"))

    @classmethod
    def not_injected_because(cls, fault: Fault, why: str) -> FaultRecord:
        """A fault that was never injected: no-effect, `why` its reason and its detail."""
        return cls(fault, fault.at_s, FaultOutcome.NO_EFFECT, detail=f"not injected: {why}", not_injected=why)
