"""The Vagrantfile and its provisioning script cannot run here: check their syntax and content."""

from __future__ import annotations

import re
import subprocess

from gradswitch.protocol.paths import REPO_ROOT
from tests.require import need_tool

VAGRANTFILE = REPO_ROOT / "Vagrantfile"
PROVISION = REPO_ROOT / "vm" / "provision.sh"
MAKEFILE = REPO_ROOT / "Makefile"


def test_vagrantfile_is_valid_ruby():
    ruby = need_tool("ruby", "apt install ruby")  # fails instead with GRADSWITCH_REQUIRE_TOOLCHAIN=1 (.ci/run)
    proc = subprocess.run([ruby, "-c", str(VAGRANTFILE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "Syntax OK" in proc.stdout


def test_provisioning_script_is_valid_bash():
    proc = subprocess.run(["bash", "-n", str(PROVISION)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_vagrantfile_uses_ubuntu_2204_and_the_repo_script():
    text = VAGRANTFILE.read_text()
    assert 'config.vm.box = "ubuntu/jammy64"' in text
    assert 'path: "vm/provision.sh"' in text


def test_libvirt_gets_a_box_built_for_libvirt():
    """ubuntu/jammy64 exists for VirtualBox only: the libvirt provider overrides it with generic/ubuntu2204."""
    text = VAGRANTFILE.read_text()
    libvirt = re.search(r'config\.vm\.provider "libvirt" do \|lv, override\|\n(.*?)\n  end', text, re.S)
    assert libvirt is not None, "no libvirt provider block with an override"
    assert 'override.vm.box = "generic/ubuntu2204"' in libvirt.group(1)


def test_provisioning_compares_p4c_with_the_stamp():
    """The p4lang packages carry whatever p4c is current; the VM says when it is not the stamped one."""
    text = PROVISION.read_text()
    assert "gradswitch/p4src/build/p4c-stamp.json" in text
    assert '"p4c_version"' in text


def test_the_venv_target_touches_a_stamp_not_the_interpreter():
    """$(VENV)/bin/python is a symlink: `touch` on it changes the system interpreter's time."""
    text = MAKEFILE.read_text()
    assert "touch $(PY)" not in text
    assert re.search(r"^\$\(INSTALLED\): pyproject\.toml$", text, re.M)
    assert "INSTALLED := $(VENV)/.installed" in text
    assert re.search(r"^venv: \$\(INSTALLED\)$", text, re.M)
    assert not re.search(r"^\w+: .*\$\(PY\)", text, re.M), "a target still depends on the interpreter's time"


def test_make_venv_does_not_touch_the_interpreter():
    need_tool("make", "apt install make")  # fails instead with GRADSWITCH_REQUIRE_TOOLCHAIN=1
    proc = subprocess.run(["make", "-n", "venv", "VENV=/nonexistent/venv"], capture_output=True, text=True,
                          cwd=REPO_ROOT, check=True)
    touched = [line for line in proc.stdout.splitlines() if line.startswith("touch")]
    assert touched == ["touch /nonexistent/venv/.installed"]


def test_provisioning_installs_toolchain_from_p4lang_packages():
    text = PROVISION.read_text()
    for pkg in ("p4lang-p4c", "p4lang-bmv2", "p4lang-pi", "mininet", "tshark"):
        assert pkg in text, pkg
    assert "download.opensuse.org/repositories/home:/p4lang" in text
    assert "make -C /vagrant venv" in text
