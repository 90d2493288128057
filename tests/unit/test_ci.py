""".ci/run on a new machine: it installs the P4 toolchain (and, on Debian 12, ns-3 with MPI) before deciding
whether those tests must run.

The decision (.ci/toolchain.sh, sourced by .ci/run) runs here with a PATH of our making: a
directory of stand-in tools, and a stand-in installer that puts the toolchain's commands into
it, so what is checked is the script's logic, not this machine's install.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from gradswitch.protocol.paths import REPO_ROOT

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


DEBIAN_12 = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
UBUNTU_2204 = 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n'


def _decide_mpi(tmp: Path, *, installed: bool = False, installer: bool = True, os_release: str = DEBIAN_12,
                uid: int = 0, builds: bool = True) -> tuple[str, bool, bool, bool]:
    """Run ensure_ns3_mpi with stand-ins; (what it printed, whether the installer ran, whether the MPI build
    ran, whether it requires the MPI tests)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    prefix = tmp / "ns3-mpi"
    _tool(bin_dir, "id", f'[ "$1" = -u ] && echo {uid}')
    for name in ("bash", "cat", "touch", "grep", "mkdir"):
        (bin_dir / name).symlink_to(subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True,
                                                   text=True, check=True).stdout.strip())
    ran, built = tmp / "installer-ran", tmp / "built"

    def install() -> str:  # what the installer does: ns-3's headers under the prefix, Open MPI's mpirun
        return (f"mkdir -p {prefix}/include/ns3; touch {prefix}/include/ns3/mpi-interface.h\n"
                f"printf '#!/bin/sh\\nexit 0\\n' > {bin_dir / 'mpirun'}; /bin/chmod +x {bin_dir / 'mpirun'}\n")

    if installed:
        subprocess.run(["bash", "-c", install()], check=True)
    script = tmp / "install-ns3-mpi.sh"
    if installer:
        script.write_text(f"touch {ran}\n" + install())
    release = tmp / "os-release"
    release.write_text(os_release)
    env = {"PATH": str(bin_dir), "GRADSWITCH_NS3_MPI_INSTALLER": str(script), "GRADSWITCH_NS3_MPI_PREFIX": str(prefix),
           "GRADSWITCH_OS_RELEASE": str(release),
           "GRADSWITCH_NS3_MPI_BUILD": f"touch {built}" if builds else f"{bin_dir / 'bash'} -c false"}
    line = (f'set -euo pipefail; . {CI / "toolchain.sh"}; ensure_ns3_mpi; '
            'echo "require=${GRADSWITCH_REQUIRE_NS3_MPI:-0}"')
    proc = subprocess.run([str(bin_dir / "bash"), "-c", line], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, ran.exists(), built.exists(), "require=1" in proc.stdout


def test_debian_12_gets_ns3_with_mpi_installed_built_against_and_its_tests_required(tmp_path):
    out, ran, built, required = _decide_mpi(tmp_path)
    assert ran and built and required, out


def test_an_installed_ns3_with_mpi_is_not_installed_again(tmp_path):
    out, ran, built, required = _decide_mpi(tmp_path, installed=True)
    assert not ran and built and required, out


def test_elsewhere_the_prebuilt_ns3_with_mpi_is_not_installed(tmp_path):
    """The archive is for Debian 12: the Ubuntu 22.04 VM builds ns-3 with MPI itself (then it is used)."""
    out, ran, built, required = _decide_mpi(tmp_path, os_release=UBUNTU_2204)
    assert not ran and not built and not required, out
    assert "build it with --enable-mpi" in out
    out, ran, built, required = _decide_mpi(tmp_path / "built-itself", installed=True, os_release=UBUNTU_2204)
    assert not ran and built and required, out


def test_mpi_tests_are_not_required_when_the_mpi_build_fails(tmp_path):
    out, ran, _, required = _decide_mpi(tmp_path, builds=False)
    assert ran and not required, out
    assert "did not build" in out


def test_not_root_or_no_installer_installs_no_ns3_with_mpi(tmp_path):
    out, ran, _, required = _decide_mpi(tmp_path, uid=1000)
    assert not ran and not required, out
    out, ran, _, required = _decide_mpi(tmp_path / "no-installer", installer=False)
    assert not ran and not required and "there is no" in out, out


def test_ci_run_builds_the_mpi_flavour_after_the_simulator():
    text = (CI / "run").read_text()
    assert text.index("\nmake venv\n") < text.index("make sim") < text.index("\nensure_ns3_mpi\n") < text.index(
        "\nmake test\n")
    assert "../shared/toolchain/install-ns3-mpi.sh" in (CI / "toolchain.sh").read_text()
