""".ci/run on a new machine: it installs the P4 toolchain (and, on Debian 12, ns-3 with MPI) before deciding
whether those tests must run; where the shared toolchain is present, whatever does not install or build (the P4
toolchain, the simulator, ns-3 with MPI and its build, Chakra, PyTorch, perf) ends the run before the tests.

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
    # the shared toolchain is "here" when its installer is (the stamp it leaves once installed: not here)
    env = {"PATH": str(bin_dir), "GRADSWITCH_TOOLCHAIN_INSTALLER": str(script),
           "GRADSWITCH_TOOLCHAIN_STAMP": str(tmp / "no-stamp")}
    line = (f'set -euo pipefail; . {CI / "toolchain.sh"}; ensure_toolchain; '
            'echo "require=${GRADSWITCH_REQUIRE_TOOLCHAIN:-0}"')
    proc = subprocess.run([str(bin_dir / "bash"), "-c", line], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
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
    out, ran, required = _decide(tmp_path, present=(), installer=False, uid=1000)
    assert not ran and not required, out
    assert "this is not root" in out


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
    """Run ensure_ns3_mpi with stand-ins, the shared toolchain absent; (what it printed, whether the installer
    ran, whether the MPI build ran, whether it requires the MPI tests)."""
    proc, ran, built = _run_mpi(tmp, installed=installed, installer=installer, os_release=os_release, uid=uid,
                                builds=builds)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, ran, built, "require=1" in proc.stdout


def _run_mpi(tmp: Path, *, installed: bool = False, installer: bool = True, os_release: str = DEBIAN_12,
             uid: int = 0, builds: bool = True, installs: bool = True,
             shared: bool = False) -> tuple[subprocess.CompletedProcess[str], bool, bool]:
    """ensure_ns3_mpi, then `echo after`: (the process, whether the installer ran, whether the MPI build ran).
    `shared`: the shared toolchain is here (its stamp), so what does not install or build ends the run."""
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
        script.write_text(f"touch {ran}\n" + (install() if installs else "exit 1\n"))
    release = tmp / "os-release"
    release.write_text(os_release)
    stamp = tmp / "stamp"
    if shared:
        stamp.write_text("installed\n")
    env = {"PATH": str(bin_dir), "GRADSWITCH_NS3_MPI_INSTALLER": str(script), "GRADSWITCH_NS3_MPI_PREFIX": str(prefix),
           "GRADSWITCH_OS_RELEASE": str(release),
           "GRADSWITCH_NS3_MPI_BUILD": f"touch {built}" if builds else f"{bin_dir / 'bash'} -c false",
           "GRADSWITCH_TOOLCHAIN_INSTALLER": str(tmp / "no-installer"), "GRADSWITCH_TOOLCHAIN_STAMP": str(stamp)}
    line = (f'set -euo pipefail; . {CI / "toolchain.sh"}; ensure_ns3_mpi; '
            'echo "require=${GRADSWITCH_REQUIRE_NS3_MPI:-0}"; echo after')
    proc = subprocess.run([str(bin_dir / "bash"), "-c", line], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    return proc, ran.exists(), built.exists()


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
    assert text.index("\nmake venv\n") < text.index("\nensure_sim\n") < text.index("\nensure_ns3_mpi\n") < text.index(
        "\nmake test\n")
    assert "../shared/toolchain/install-ns3-mpi.sh" in (CI / "toolchain.sh").read_text()


# Where the shared toolchain is present, the CI cannot pass on skips: each of .ci/toolchain.sh's ensure_* ends
# the run (non-zero, one "ci: FAILED: ..." line) when what it installs or builds does not, and nothing after it
# runs (here `echo after`; in .ci/run, `make lint` and `make test`). Without the shared toolchain the same
# failure only makes those tests skip.

SWITCHES = ("TOOLCHAIN", "BMV2_NOLOG", "NS3", "NS3_MPI", "CHAKRA", "TORCH", "PERF")


def _ensure(tmp: Path, call: str, *, shared: bool, tools: dict[str, str] | None = None,
            venv: dict[str, str] | None = None, uid: int = 0) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `call` (an ensure_* of .ci/toolchain.sh) with a PATH of stand-in tools (name: body) and a stand-in venv
    (bin/name: body), then `echo after`; (the process, the GRADSWITCH_REQUIRE_* switches it exported, by suffix).
    `shared`: the shared toolchain's installer is beside the checkout."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(parents=True)
    _tool(bin_dir, "id", f'[ "$1" = -u ] && echo {uid}')
    for name in ("bash", "touch"):
        (bin_dir / name).symlink_to(subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True,
                                                   text=True, check=True).stdout.strip())
    for name, body in (tools or {}).items():
        _tool(bin_dir, name, body)
    venv_dir = tmp / "venv"
    (venv_dir / "bin").mkdir(parents=True)
    for name, body in (venv or {}).items():
        _tool(venv_dir / "bin", name, body)
    installer = tmp / "install.sh"
    if shared:
        installer.write_text("exit 0\n")
    env = {"PATH": str(bin_dir), "GRADSWITCH_TOOLCHAIN_INSTALLER": str(installer),
           "GRADSWITCH_TOOLCHAIN_STAMP": str(tmp / "no-stamp"), "GRADSWITCH_CI_VENV": str(venv_dir)}
    report = "; ".join(f'echo "{s}=${{GRADSWITCH_REQUIRE_{s}:-0}}"' for s in SWITCHES)
    line = f'set -euo pipefail; . {CI / "toolchain.sh"}; {call}; echo after; {report}'
    proc = subprocess.run([str(bin_dir / "bash"), "-c", line], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    return proc, {s for s in SWITCHES if f"{s}=1" in proc.stdout.splitlines()}


def _stopped(proc: subprocess.CompletedProcess[str], what: str) -> None:
    """The run ended at the failing step: non-zero, one line naming `what`, nothing after it."""
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "after" not in proc.stdout.splitlines(), proc.stdout
    failed = [line for line in proc.stderr.splitlines() if line.startswith("ci: FAILED: ")]
    assert len(failed) == 1 and what in failed[0], proc.stderr


def _went_on(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 0 and "after" in proc.stdout.splitlines(), proc.stdout + proc.stderr
    assert "FAILED" not in proc.stderr, proc.stderr


FAILS = "echo no >&2; exit 1"
MAKE_SIM = {"make": '[ "$1" = sim ] && touch "${0%/*}/../sim-built"'}


def test_a_clone_whose_simulator_does_not_build_exits_non_zero_before_the_tests(tmp_path):
    proc, required = _ensure(tmp_path, "ensure_sim", shared=True, tools={"make": FAILS})
    _stopped(proc, "the ns-3 simulator did not build (make sim)")
    assert not required


def test_a_simulator_that_builds_is_required(tmp_path):
    proc, required = _ensure(tmp_path, "ensure_sim", shared=True, tools=MAKE_SIM)
    _went_on(proc)
    assert (tmp_path / "sim-built").exists() and required == {"NS3"}


def test_without_the_shared_toolchain_a_simulator_that_does_not_build_skips(tmp_path):
    proc, required = _ensure(tmp_path, "ensure_sim", shared=False, tools={"make": FAILS})
    _went_on(proc)
    assert not required and "tests/ns3 will skip" in proc.stdout


def test_a_clone_whose_chakra_does_not_install_exits_non_zero_before_the_tests(tmp_path):
    proc, required = _ensure(tmp_path, "ensure_chakra", shared=True, venv={"pip": FAILS})
    _stopped(proc, "mlc-chakra==1.0.0 did not install")
    assert not required


def test_chakra_that_installs_is_required_and_without_the_shared_toolchain_its_failure_skips(tmp_path):
    pip = 'echo "$@" > "${0%/*}/../pip-args"'
    proc, required = _ensure(tmp_path / "installs", "ensure_chakra", shared=True, venv={"pip": pip})
    _went_on(proc)
    assert required == {"CHAKRA"}
    assert (tmp_path / "installs" / "venv" / "pip-args").read_text().split() == [
        "install", "--quiet", "--no-deps", "mlc-chakra==1.0.0"]
    proc, required = _ensure(tmp_path / "lenient", "ensure_chakra", shared=False, venv={"pip": FAILS})
    _went_on(proc)
    assert not required and "will skip" in proc.stdout


def test_a_clone_whose_venv_does_not_import_torch_exits_non_zero_before_the_tests(tmp_path):
    proc, required = _ensure(tmp_path, "ensure_torch", shared=True, venv={"python": FAILS})
    _stopped(proc, "PyTorch does not import")
    assert not required


def test_torch_that_imports_is_required_and_without_the_shared_toolchain_its_absence_skips(tmp_path):
    python = '[ "$1 $2" = "-c import torch" ]'
    proc, required = _ensure(tmp_path / "imports", "ensure_torch", shared=True, venv={"python": python})
    _went_on(proc)
    assert required == {"TORCH"}
    proc, required = _ensure(tmp_path / "lenient", "ensure_torch", shared=False, venv={"python": FAILS})
    _went_on(proc)
    assert not required and "will skip" in proc.stdout


def test_a_clone_without_perf_or_valgrind_exits_non_zero_before_the_tests(tmp_path):
    proc, required = _ensure(tmp_path, "ensure_perf", shared=True)
    _stopped(proc, "perf is not on PATH")
    proc, required = _ensure(tmp_path / "perf", "ensure_perf", shared=True, tools={"perf": "exit 0"})
    _stopped(proc, "valgrind is not on PATH")  # the instruction counts' (tests/ns3/test_sim_instructions.py)
    proc, required = _ensure(tmp_path / "both", "ensure_perf", shared=True,
                             tools={"perf": "exit 0", "valgrind": "exit 0"})
    _went_on(proc)
    assert required == {"PERF"}
    proc, required = _ensure(tmp_path / "lenient", "ensure_perf", shared=False)
    _went_on(proc)
    assert not required


def test_a_toolchain_that_does_not_install_exits_non_zero_before_the_tests(tmp_path):
    installer = tmp_path / "fails.sh"
    installer.write_text("exit 3\n")
    proc, required = _ensure(tmp_path / "run", f"GRADSWITCH_TOOLCHAIN_INSTALLER={installer} ensure_toolchain",
                             shared=False, tools={"mnexec": "exit 0"})
    _stopped(proc, f"the P4 toolchain did not install ({installer})")
    assert not required


def test_where_the_shared_toolchain_is_its_absence_or_no_root_ends_the_run(tmp_path):
    proc, _ = _ensure(tmp_path / "not-root", "ensure_toolchain", shared=True, uid=1000)
    _stopped(proc, "this is not root")
    # the installer ran (here it installs nothing) and simple_switch_grpc is still not there
    proc, _ = _ensure(tmp_path / "nothing", "ensure_toolchain", shared=True, tools={"mnexec": "exit 0"})
    _stopped(proc, "missing: simple_switch_grpc p4c-bm2-ss")


def test_the_shared_toolchain_installed_requires_its_bmv2_without_logging_too(tmp_path):
    tools = {name: "exit 0" for name in (*TOOLCHAIN, "mnexec")}
    proc, required = _ensure(tmp_path / "shared", "ensure_toolchain", shared=True, tools=tools)
    _went_on(proc)
    assert required == {"TOOLCHAIN", "BMV2_NOLOG"}
    (tmp_path / "stamped").mkdir()
    stamp = tmp_path / "stamped" / "stamp"
    stamp.write_text("installed\n")  # installed from the shared toolchain, its installer gone
    proc, required = _ensure(tmp_path / "stamped" / "run", f"GRADSWITCH_TOOLCHAIN_STAMP={stamp} ensure_toolchain",
                             shared=False, tools=tools)
    _went_on(proc)
    assert required == {"TOOLCHAIN", "BMV2_NOLOG"}
    proc, required = _ensure(tmp_path / "own", "ensure_toolchain", shared=False, tools=tools)
    _went_on(proc)
    assert required == {"TOOLCHAIN"}  # a toolchain of one's own (the VM's) need not have it


def test_a_clone_whose_mpi_build_fails_exits_non_zero_before_the_tests(tmp_path):
    proc, ran, _ = _run_mpi(tmp_path, builds=False, shared=True)
    assert ran
    _stopped(proc, "the simulator did not build against ns-3 with MPI")


def test_a_clone_whose_ns3_with_mpi_does_not_install_exits_non_zero_before_the_tests(tmp_path):
    proc, ran, built = _run_mpi(tmp_path / "fails", installs=False, shared=True)
    assert ran and not built
    _stopped(proc, "ns-3 with MPI did not install")
    for name, kwargs in (("not-root", {"uid": 1000}), ("ubuntu", {"os_release": UBUNTU_2204}),
                         ("no-installer", {"installer": False})):
        proc, ran, built = _run_mpi(tmp_path / name, shared=True, **kwargs)
        assert not ran and not built
        _stopped(proc, "ns-3 with MPI did not install")
    proc, ran, built = _run_mpi(tmp_path / "works", shared=True)
    assert ran and built and proc.returncode == 0 and "require=1" in proc.stdout, proc.stdout + proc.stderr


def test_ci_run_ensures_everything_before_lint_and_tests():
    text = (CI / "run").read_text()
    lint = text.index("\nmake lint\n")
    assert lint < text.index("\nmake test\n")
    for step in ("ensure_toolchain", "ensure_chakra", "ensure_torch", "ensure_sim", "ensure_ns3_mpi", "ensure_perf"):
        assert text.index(f"\n{step}\n") < lint, step
        assert f"\n{step}() {{\n" in (CI / "toolchain.sh").read_text(), step
    assert text.index("\nmake venv\n") < text.index("\nensure_chakra\n")
    # what the functions do is not done again, leniently, in .ci/run itself
    commands = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if "pip install" in line or "make sim" in line or "REQUIRE" in line]
