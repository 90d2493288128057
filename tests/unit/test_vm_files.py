"""The Vagrantfile and its provisioning script cannot run here: check their syntax and content."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from protocol.paths import REPO_ROOT

VAGRANTFILE = REPO_ROOT / "Vagrantfile"
PROVISION = REPO_ROOT / "vm" / "provision.sh"


@pytest.mark.skipif(shutil.which("ruby") is None, reason="ruby is not installed (apt install ruby)")
def test_vagrantfile_is_valid_ruby():
    proc = subprocess.run(["ruby", "-c", str(VAGRANTFILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Syntax OK" in proc.stdout


def test_provisioning_script_is_valid_bash():
    proc = subprocess.run(["bash", "-n", str(PROVISION)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_vagrantfile_uses_ubuntu_2204_and_the_repo_script():
    text = VAGRANTFILE.read_text()
    assert 'config.vm.box = "ubuntu/jammy64"' in text
    assert 'path: "vm/provision.sh"' in text


def test_provisioning_installs_toolchain_from_p4lang_packages():
    text = PROVISION.read_text()
    for pkg in ("p4lang-p4c", "p4lang-bmv2", "p4lang-pi", "mininet", "tshark"):
        assert pkg in text, pkg
    assert "download.opensuse.org/repositories/home:/p4lang" in text
    assert "make -C /vagrant venv" in text
