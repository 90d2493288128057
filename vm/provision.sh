#!/usr/bin/env bash
# Provisioning of the gradswitch VM (Ubuntu 22.04), run by `vagrant up` as root.
# Installs the P4 toolchain from the p4lang distribution packages (openSUSE Build Service),
# Mininet, tshark, the project's venv, the ns-3 simulator and ns-3 built with MPI. Safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

. /etc/os-release
P4LANG_REPO="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}"

apt-get update -qq
apt-get install -y -qq --no-install-recommends ca-certificates curl gnupg make git \
    python3 python3-venv python3-dev mininet tshark tcpdump ethtool iproute2 nftables iperf3 ruby \
    g++ cmake ninja-build nlohmann-json3-dev

if [ ! -f /etc/apt/sources.list.d/p4lang.list ]; then
    curl -fsSL "${P4LANG_REPO}/Release.key" | gpg --dearmor > /etc/apt/trusted.gpg.d/p4lang.gpg
    echo "deb ${P4LANG_REPO}/ /" > /etc/apt/sources.list.d/p4lang.list
    apt-get update -qq
fi
apt-get install -y -qq p4lang-pi p4lang-bmv2 p4lang-p4c

# The committed compiled program records the p4c that made it (gradswitch/p4src/build/p4c-stamp.json); the p4lang packages
# carry whatever p4c is current, and tests/bmv2/test_build.py compares a fresh compile only with the same version.
stamped=$(sed -n 's/.*"p4c_version": "\([^"]*\)".*/\1/p' /vagrant/p4src/build/p4c-stamp.json)
installed=$(p4c-bm2-ss --version 2>&1 | sed -n 's/^Version \([^ ]*\).*/\1/p')
if [ "${stamped}" != "${installed}" ]; then
    echo "p4c ${installed} installed, the committed program is p4c ${stamped}'s: the switches load the committed" \
         "program; tests/bmv2/test_build.py skips its byte comparison (gradswitch build recompiles and restamps)"
fi

# The venv lives outside the synced folder, so the host's own .venv is never mixed up with it.
VENV=/opt/gradswitch-venv
grep -q '^VENV=' /etc/environment || echo "VENV=${VENV}" >> /etc/environment
make -C /vagrant venv VENV="${VENV}" PYTHON=python3
make -C /vagrant sim VENV="${VENV}" PYTHON=python3 || echo "the ns-3 simulator did not build (make sim)"

# ns-3 3.44 built with MPI, for the simulator over MPI ranks (docs/simulator.md "Distributed over MPI ranks"):
# the PyPI wheel has no MPI, so the VM builds it from source under /opt/ns3-mpi once (some minutes), then the
# simulator against it.
apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev
if [ ! -f /opt/ns3-mpi/include/ns3/mpi-interface.h ]; then
    src=$(mktemp -d)
    if git clone -q --depth 1 --branch ns-3.44 https://gitlab.com/nsnam/ns-3-dev.git "$src/ns-3.44"; then
        (cd "$src/ns-3.44" \
            && ./ns3 configure --build-profile=release --enable-mpi --prefix=/opt/ns3-mpi \
                   --enable-modules="core;network;point-to-point;mpi" \
                   --disable-examples --disable-tests --disable-python-bindings \
            && ./ns3 build -j 2 && ./ns3 install) || echo "ns-3 with MPI did not build; the MPI tests will skip"
    fi
    rm -rf "$src"
fi
(cd /vagrant && "${VENV}/bin/python" -m gradswitch.sim.build --mpi) \
    || echo "the simulator's MPI build did not build (python -m gradswitch.sim.build --mpi)"
chmod -R a+rX "${VENV}"

simple_switch_grpc --version
p4c-bm2-ss --version
"${VENV}/bin/gradswitch" doctor || true
echo "gradswitch VM ready: vagrant ssh -c 'cd /vagrant && make demo'"
