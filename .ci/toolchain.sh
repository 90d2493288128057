# Sourced by .ci/run: is the P4 toolchain here, and if not, can it be installed? And the simulator, ns-3 with MPI,
# Chakra, PyTorch and perf: each function below installs or builds one, and exports the GRADSWITCH_REQUIRE_* switch
# that turns the skips of its tests into failures (tests/require.py, tests/conftest.py).
#
# Where the shared toolchain is present (ci_strict: ../shared/toolchain/install.sh beside the checkout, or the
# toolchain it installs, /opt/p4/.gradswitch-toolchain), the CI must not pass on skips: whatever of these does not
# install or build ends the run there (ci_fail: one line naming it, exit 1), before `make lint` and `make test`.
# Elsewhere (a machine without ../shared) each only says so and its tests skip with the reason.
#
# ensure_toolchain: when simple_switch_grpc is not on PATH and we are root, run the prebuilt
# toolchain's installer (../shared/toolchain/install.sh beside the checkout, or
# $GRADSWITCH_TOOLCHAIN_INSTALLER) first; then, with simple_switch_grpc, p4c-bm2-ss, mnexec and
# root all present, export GRADSWITCH_REQUIRE_TOOLCHAIN=1 so that a test that would skip for
# lack of them fails instead (and, where the shared toolchain is, GRADSWITCH_REQUIRE_BMV2_NOLOG=1: its archive
# holds the BMv2 without logging macros). The toolchain itself is never part of the repository.

# ci_strict: whether the shared toolchain is here (its installer, or its stamp once installed).
ci_strict() {
    [ -f "${GRADSWITCH_TOOLCHAIN_INSTALLER:-../shared/toolchain/install.sh}" ] \
        || [ -f "${GRADSWITCH_TOOLCHAIN_STAMP:-/opt/p4/.gradswitch-toolchain}" ]
}

# ci_fail: the one line saying what failed, and the end of the run.
ci_fail() {
    echo "ci: FAILED: $*" >&2
    exit 1
}

ensure_toolchain() {
    local installer="${GRADSWITCH_TOOLCHAIN_INSTALLER:-../shared/toolchain/install.sh}"
    if ! command -v simple_switch_grpc >/dev/null 2>&1; then
        if [ "$(id -u)" != 0 ]; then
            ci_strict && ci_fail "the shared toolchain is here but this is not root: run .ci/run as root to install it"
            echo "ci: simple_switch_grpc is not on PATH and this is not root: not installing the P4 toolchain"
        elif [ -f "$installer" ]; then
            echo "ci: simple_switch_grpc is not on PATH: installing the P4 toolchain ($installer)"
            bash "$installer" || ci_fail "the P4 toolchain did not install ($installer)"
            hash -r
        else
            echo "ci: simple_switch_grpc is not on PATH and there is no $installer"
        fi
    fi
    if command -v simple_switch_grpc >/dev/null 2>&1 && command -v p4c-bm2-ss >/dev/null 2>&1 \
            && [ "$(id -u)" = 0 ] && command -v mnexec >/dev/null 2>&1; then
        echo "ci: P4 toolchain present: every test must run"
        export GRADSWITCH_REQUIRE_TOOLCHAIN=1
        if ci_strict; then
            export GRADSWITCH_REQUIRE_BMV2_NOLOG=1
        fi
    elif ci_strict; then
        local absent=""
        for tool in simple_switch_grpc p4c-bm2-ss mnexec; do
            command -v "$tool" >/dev/null 2>&1 || absent="$absent $tool"
        done
        [ "$(id -u)" = 0 ] || absent="$absent root"
        ci_fail "the shared toolchain is here but not usable, missing:$absent (mnexec: apt install mininet)"
    else
        echo "ci: P4 toolchain or root absent: BMv2, p4c and Mininet tests skip"
    fi
}

# ensure_ns3_mpi: ns-3 3.44 built with MPI and the simulator's MPI build, for the tests marked
# ns3_mpi. When $prefix (/opt/ns3-mpi) holds no ns-3 with MPI or mpirun is missing, and we are root on
# Debian 12 (the prebuilt archive's system), run ../shared/toolchain/install-ns3-mpi.sh (or
# $GRADSWITCH_NS3_MPI_INSTALLER) first; elsewhere (the Ubuntu 22.04 VM builds ns-3 with --enable-mpi
# itself: vm/provision.sh, docs/simulator.md) only use what is there. Then build the simulator against it
# ($GRADSWITCH_NS3_MPI_BUILD, by default the venv's `python -m gradswitch.sim.build --mpi`), and once that
# succeeded export GRADSWITCH_REQUIRE_NS3_MPI=1 so that an MPI test that would skip fails instead. Where the
# shared toolchain is (ci_strict), ns-3 with MPI not installing (not root, not Debian 12, no installer, the installer
# failing) or the MPI build failing ends the run.
ensure_ns3_mpi() {
    local installer="${GRADSWITCH_NS3_MPI_INSTALLER:-../shared/toolchain/install-ns3-mpi.sh}"
    local prefix="${GRADSWITCH_NS3_MPI_PREFIX:-/opt/ns3-mpi}"
    local os_release="${GRADSWITCH_OS_RELEASE:-/etc/os-release}"
    local build="${GRADSWITCH_NS3_MPI_BUILD:-.venv/bin/python -m gradswitch.sim.build --mpi}"
    local debian12=0 why=""
    if [ -f "$os_release" ] && grep -qx 'ID=debian' "$os_release" && grep -qx 'VERSION_ID="12"' "$os_release"; then
        debian12=1
    fi
    if [ ! -f "$prefix/include/ns3/mpi-interface.h" ] || ! command -v mpirun >/dev/null 2>&1; then
        if [ "$(id -u)" != 0 ]; then
            why="no ns-3 with MPI under $prefix and this is not root: not installing it"
        elif [ "$debian12" != 1 ]; then
            why="no ns-3 with MPI under $prefix; the prebuilt one is for Debian 12: build it with --enable-mpi (docs/simulator.md)"
        elif [ -f "$installer" ]; then
            echo "ci: no ns-3 with MPI under $prefix: installing it ($installer)"
            if ! bash "$installer"; then
                why="$installer failed"
            fi
            hash -r
        else
            why="no ns-3 with MPI under $prefix and there is no $installer"
        fi
        if [ -n "$why" ]; then
            ci_strict && ci_fail "ns-3 with MPI did not install: $why"
            echo "ci: $why; the MPI tests will skip"
        fi
    fi
    if [ -f "$prefix/include/ns3/mpi-interface.h" ] && command -v mpirun >/dev/null 2>&1; then
        if $build; then
            echo "ci: ns-3 with MPI present and the simulator built against it: the MPI tests must run"
            export GRADSWITCH_REQUIRE_NS3_MPI=1
        else
            ci_strict && ci_fail "the simulator did not build against ns-3 with MPI under $prefix ($build)"
            echo "ci: the simulator did not build against $prefix; the MPI tests will skip"
        fi
    else
        ci_strict && ci_fail "ns-3 with MPI (under $prefix) or mpirun is absent after installing it"
        echo "ci: ns-3 with MPI or mpirun absent: the MPI tests skip"
    fi
}

# ensure_sim: the ns-3 simulator (docs/simulator.md): `make sim` puts the ns3 wheel into the venv and builds
# gradswitch-sim from gradswitch/sim/ns3/. Once it builds, its tests must run (GRADSWITCH_REQUIRE_NS3=1).
ensure_sim() {
    if make sim; then
        echo "ci: ns-3 simulator built: its tests must run"
        export GRADSWITCH_REQUIRE_NS3=1
    else
        ci_strict && ci_fail "the ns-3 simulator did not build (make sim)"
        echo "ci: the ns-3 simulator did not build; tests/ns3 will skip"
    fi
}

# ensure_chakra: MLCommons Chakra (its et_def_pb2, protolib, chakra_jsonizer, chakra_generator, chakra_converter
# Text) into the venv ($GRADSWITCH_CI_VENV, by default .venv), so that the interop tests of
# gradswitch/workload/chakra must run (GRADSWITCH_REQUIRE_CHAKRA=1). --no-deps: those need only protobuf, which the
# venv has; the HolisticTraceAnalysis it declares pulls jupyterlab, pandas and plotly (105 wheels, 88 MB).
ensure_chakra() {
    local venv="${GRADSWITCH_CI_VENV:-.venv}"
    if "$venv/bin/pip" install --quiet --no-deps mlc-chakra==1.0.0; then
        export GRADSWITCH_REQUIRE_CHAKRA=1
    else
        ci_strict && ci_fail "mlc-chakra==1.0.0 did not install ($venv/bin/pip install --no-deps mlc-chakra==1.0.0)"
        echo "ci: could not install mlc-chakra; tests/unit/test_chakra_interop.py will skip"
    fi
}

# ensure_torch: `make venv` installs the torch that .[dev] pins (pyproject.toml; the CPU build where the machine
# has it); once the venv imports it, the tests of `gradswitch trace-model` must run (GRADSWITCH_REQUIRE_TORCH=1).
ensure_torch() {
    local venv="${GRADSWITCH_CI_VENV:-.venv}"
    if "$venv/bin/python" -c 'import torch' >/dev/null 2>&1; then
        export GRADSWITCH_REQUIRE_TORCH=1
    else
        ci_strict && ci_fail "PyTorch does not import in $venv (make venv installs the torch the dev extra pins)"
        echo "ci: torch does not import in $venv; the tests of gradswitch trace-model will skip"
    fi
}

# ensure_perf: perf (Debian's linux-perf) and valgrind, which .ci/run installs with the other system tools, for
# tests/ns3/test_profile.py and tests/ns3/test_sim_instructions.py; once both are on PATH, those tests must run
# (GRADSWITCH_REQUIRE_PERF=1: a `perf record` that cannot sample fails, naming why).
ensure_perf() {
    local tool
    for tool in perf valgrind; do
        if ! command -v "$tool" >/dev/null 2>&1; then
            ci_strict && ci_fail "$tool is not on PATH (apt install linux-perf valgrind did not install it)"
            echo "ci: $tool is not on PATH; tests/ns3/test_profile.py and test_sim_instructions.py will skip"
            return 0
        fi
    done
    export GRADSWITCH_REQUIRE_PERF=1
}
