""".ci/run on a new machine: it installs the P4 toolchain before deciding whether the toolchain tests must run.

The decision (.ci/toolchain.sh, sourced by .ci/run) runs here with a PATH of our making: a
directory of stand-in tools, and a stand-in installer that puts the toolchain's commands into
it, so what is checked is the script's logic, not this machine's install.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from protocol.paths import REPO_ROOT

CI = REPO_ROOT / ".ci"
TOOLCHAIN = ("simple_switch_grpc", "p4c-bm2-ss")


def _tool(bin_dir: Path, name: str, body: str = "exit 0") -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _decide(tmp: Path, present: tuple[str, ...], installer: bool, uid: int = 0) -> tuple[str, bool, bool]:
    """Run ensure_toolchain; (what it printed, whether the installer ran, whether it requires the toolchain)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("mnexec", *present):
        _tool(bin_dir, name)
    _tool(bin_dir, "id", f'[ "$1" = -u ] && echo {uid}')
    # Only the shell's own needs besides our directory: no /usr/local/bin, where this machine's toolchain is.
    for name in ("bash", "cat", "touch"):
        (bin_dir / name).symlink_to(subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True,
                                                   text=True, check=True).stdout.strip())
    ran = tmp / "installer-ran"
    script = tmp / "install.sh"
    if installer:
        script.write_text(f"touch {ran}\n" + "".join(
            f"printf '#!/bin/sh\\nexit 0\\n' > {bin_dir / t}; chmod +x {bin_dir / t}\n".replace("chmod", "/bin/chmod")
            for t in TOOLCHAIN))
    env = {"PATH": str(bin_dir), "GRADSWITCH_TOOLCHAIN_INSTALLER": str(script)}
    line = (f'set -euo pipefail; . {CI / "toolchain.sh"}; ensure_toolchain; '
            'echo "require=${GRADSWITCH_REQUIRE_TOOLCHAIN:-0}"')
    proc = subprocess.run([str(bin_dir / "bash"), "-c", line], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, ran.exists(), "require=1" in proc.stdout


def test_a_new_machine_gets_the_toolchain_installed_and_every_test_required(tmp_path):
    out, ran, required = _decide(tmp_path, present=(), installer=True)
    assert ran and required, out
    assert "installing the P4 toolchain" in out


def test_an_installed_toolchain_is_not_installed_again(tmp_path):
    out, ran, required = _decide(tmp_path, present=TOOLCHAIN, installer=True)
    assert not ran and required, out


def test_without_the_installer_the_toolchain_tests_skip(tmp_path):
    out, ran, required = _decide(tmp_path, present=(), installer=False)
    assert not ran and not required, out
    assert "there is no" in out


def test_not_root_installs_nothing(tmp_path):
    out, ran, required = _decide(tmp_path, present=(), installer=True, uid=1000)
    assert not ran and not required, out


def test_ci_run_sources_the_decision_before_the_tests():
    text = (CI / "run").read_text()
    assert text.index("\n. .ci/toolchain.sh\n") < text.index("\nensure_toolchain\n") < text.index("\nmake test\n")
    # the toolchain is installed from shared/, never committed or built here
    assert "../shared/toolchain/install.sh" in (CI / "toolchain.sh").read_text()
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO_ROOT).stdout.split()
    assert not [f for f in tracked if f.endswith((".tar.xz", ".tar.gz", ".deb"))]
