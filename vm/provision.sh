#!/usr/bin/env bash
# Provisioning of the gradswitch VM (Ubuntu 22.04), run by `vagrant up` as root.
# Installs the P4 toolchain from the p4lang distribution packages (openSUSE Build Service),
# Mininet, tshark and the project's venv. Safe to run again.
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

# The venv lives outside the synced folder, so the host's own .venv is never mixed up with it.
VENV=/opt/gradswitch-venv
grep -q '^VENV=' /etc/environment || echo "VENV=${VENV}" >> /etc/environment
make -C /vagrant venv VENV="${VENV}" PYTHON=python3
make -C /vagrant sim VENV="${VENV}" PYTHON=python3 || echo "the ns-3 simulator did not build (make sim)"
chmod -R a+rX "${VENV}"

simple_switch_grpc --version
p4c-bm2-ss --version
"${VENV}/bin/gradswitch" doctor || true
echo "gradswitch VM ready: vagrant ssh -c 'cd /vagrant && make demo'"
