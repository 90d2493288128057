# Sourced by .ci/run: is the P4 toolchain here, and if not, can it be installed?
#
# ensure_toolchain: when simple_switch_grpc is not on PATH and we are root, run the prebuilt
# toolchain's installer (../shared/toolchain/install.sh beside the checkout, or
# $GRADSWITCH_TOOLCHAIN_INSTALLER) first; then, with simple_switch_grpc, p4c-bm2-ss, mnexec and
# root all present, export GRADSWITCH_REQUIRE_TOOLCHAIN=1 so that a test that would skip for
# lack of them fails instead. The toolchain itself is never part of the repository.

ensure_toolchain() {
    local installer="${GRADSWITCH_TOOLCHAIN_INSTALLER:-../shared/toolchain/install.sh}"
    if ! command -v simple_switch_grpc >/dev/null 2>&1; then
        if [ "$(id -u)" != 0 ]; then
            echo "ci: simple_switch_grpc is not on PATH and this is not root: not installing the P4 toolchain"
        elif [ -f "$installer" ]; then
            echo "ci: simple_switch_grpc is not on PATH: installing the P4 toolchain ($installer)"
            bash "$installer" || echo "ci: $installer failed; the BMv2, p4c and Mininet tests will skip"
            hash -r
        else
            echo "ci: simple_switch_grpc is not on PATH and there is no $installer"
        fi
    fi
    if command -v simple_switch_grpc >/dev/null 2>&1 && command -v p4c-bm2-ss >/dev/null 2>&1 \
            && [ "$(id -u)" = 0 ] && command -v mnexec >/dev/null 2>&1; then
        echo "ci: P4 toolchain present: every test must run"
        export GRADSWITCH_REQUIRE_TOOLCHAIN=1
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
# succeeded export GRADSWITCH_REQUIRE_NS3_MPI=1 so that an MPI test that would skip fails instead.
ensure_ns3_mpi() {
    local installer="${GRADSWITCH_NS3_MPI_INSTALLER:-../shared/toolchain/install-ns3-mpi.sh}"
    local prefix="${GRADSWITCH_NS3_MPI_PREFIX:-/opt/ns3-mpi}"
    local os_release="${GRADSWITCH_OS_RELEASE:-/etc/os-release}"
    local build="${GRADSWITCH_NS3_MPI_BUILD:-.venv/bin/python -m gradswitch.sim.build --mpi}"
    local debian12=0
    if [ -f "$os_release" ] && grep -qx 'ID=debian' "$os_release" && grep -qx 'VERSION_ID="12"' "$os_release"; then
        debian12=1
    fi
    if [ ! -f "$prefix/include/ns3/mpi-interface.h" ] || ! command -v mpirun >/dev/null 2>&1; then
        if [ "$(id -u)" != 0 ]; then
            echo "ci: no ns-3 with MPI under $prefix and this is not root: not installing it"
        elif [ "$debian12" != 1 ]; then
            echo "ci: no ns-3 with MPI under $prefix; the prebuilt one is for Debian 12: build it with --enable-mpi" \
                 "(docs/simulator.md)"
        elif [ -f "$installer" ]; then
            echo "ci: no ns-3 with MPI under $prefix: installing it ($installer)"
            bash "$installer" || echo "ci: $installer failed; the MPI tests will skip"
            hash -r
        else
            echo "ci: no ns-3 with MPI under $prefix and there is no $installer"
        fi
    fi
    if [ -f "$prefix/include/ns3/mpi-interface.h" ] && command -v mpirun >/dev/null 2>&1; then
        if $build; then
            echo "ci: ns-3 with MPI present and the simulator built against it: the MPI tests must run"
            export GRADSWITCH_REQUIRE_NS3_MPI=1
        else
            echo "ci: the simulator did not build against $prefix; the MPI tests will skip"
        fi
    else
        echo "ci: ns-3 with MPI or mpirun absent: the MPI tests skip"
    fi
}
