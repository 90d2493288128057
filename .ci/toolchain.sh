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
