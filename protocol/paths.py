"""Where the project's files are: the P4 sources, the compiled artifacts, run directories."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
P4SRC = REPO_ROOT / "p4src"
P4_PROGRAM = P4SRC / "gradswitch.p4"
P4_CONFIG = P4SRC / "include" / "config.p4"
P4_BUILD = P4SRC / "build"
BMV2_JSON = P4_BUILD / "gradswitch.json"
P4INFO = P4_BUILD / "gradswitch.p4info.txtpb"
EXPERIMENTS = REPO_ROOT / "experiments"


def runtime_dir() -> Path:
    """Directory for logs, pcaps and the control socket of running networks.

    GRADSWITCH_RUNTIME_DIR overrides it; the default is /tmp/gradswitch (switch logs
    and pcaps must be on a local file system the root-owned BMv2 processes can write).
    """
    path = Path(os.environ.get("GRADSWITCH_RUNTIME_DIR", "/tmp/gradswitch"))
    path.mkdir(parents=True, exist_ok=True)
    return path
