"""The wheel installs and runs outside the checkout: built from the checkout's files (`pip wheel`), installed with
its dependencies from PyPI into a clean venv (cached per dependency list: $XDG_CACHE_HOME/gradswitch/test-venvs),
and run from a temporary directory, with nothing of the checkout on the path.

Marked `package` (minutes the first time: the dependencies come from PyPI). The ns-3 run builds the simulator from
the shipped sources into the user's cache on first use (minutes; marked ns3 too); the BMv2 run needs Mininet.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gradswitch.protocol.paths import REPO_ROOT, user_cache_dir
from gradswitch.sim.build import WHEEL as NS3_WHEEL

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

pytestmark = [pytest.mark.package, pytest.mark.timeout(1800)]

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


@dataclass(frozen=True)
class Installed:
    venv: Path
    cwd: Path  # a directory outside the checkout

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.venv / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        return subprocess.run(list(args), capture_output=True, text=True, cwd=self.cwd, timeout=timeout, env=env,
                              check=False)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.venv / "bin" / "python"), "-c", code)

    def gradswitch(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.venv / "bin" / "gradswitch"), *args, timeout=timeout)


def checkout_copy(dest: Path) -> Path:
    """The checkout's files (tracked, and untracked ones git does not ignore), links kept as links: what a clone
    holds, without the build folders an in-tree build would leave in the checkout."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], capture_output=True, cwd=REPO_ROOT,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        source = REPO_ROOT / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted, not yet committed
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    return dest


def dependencies_key() -> str:
    """The cached venv's name: the Python and the dependency list (another list, another venv)."""
    deps = json.dumps([sys.version_info[:2], PYPROJECT["project"]["dependencies"]])
    return hashlib.sha256(deps.encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel` builds from a copy of the checkout: built once for this module's tests, which only read
    it (its file list) or install it (into venvs of their own)."""
    source = checkout_copy(tmp_path_factory.mktemp("clone"))
    wheels = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(source)],
                   check=True, timeout=600)
    (built,) = wheels.glob("gradswitch-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[Installed]:
    cache = user_cache_dir() / "test-venvs"
    cache.mkdir(parents=True, exist_ok=True)
    env_dir = cache / f"venv-{dependencies_key()}"
    with (cache / f"{env_dir.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        if not (env_dir / ".dependencies-installed").exists():
            shutil.rmtree(env_dir, ignore_errors=True)
            venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
            subprocess.run([*pip, str(wheel)], check=True, timeout=1500)
            (env_dir / ".dependencies-installed").touch()
        else:
            subprocess.run([*pip, "--no-deps", "--force-reinstall", str(wheel)], check=True, timeout=600)
        yield Installed(env_dir, tmp_path_factory.mktemp("elsewhere"))


def test_version(installed):
    proc = installed.gradswitch("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"gradswitch {PYPROJECT['project']['version']}"), proc.stdout


def test_the_code_and_its_data_come_from_the_installed_package(installed):
    proc = installed.python(
        "import json\n"
        "import gradswitch, gradswitch.protocol.paths as p\n"
        "from gradswitch.protocol.p4_constants import CONFIG\n"
        "from gradswitch.workload.gradients import workload_names, MODELS_DIR\n"
        "from gradswitch.experiment.shipped_specs import EXPERIMENTS\n"
        "from gradswitch.experiment.compare import load_spec\n"
        "import gradswitch.sim.build as b\n"
        "print(json.dumps({'package': gradswitch.__file__, 'checkout': str(p.CHECKOUT), 'p4src': str(p.P4SRC),\n"
        "    'port': CONFIG.ROCE_V2_UDP_PORT, 'workloads': workload_names(), 'models': str(MODELS_DIR),\n"
        "    'runs': len(load_spec(EXPERIMENTS / 'baselines.toml').runs), 'sources': len(b.sources()),\n"
        "    'sim_build': str(b.build_dir())}))")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    site = installed.venv / "lib"
    for key in ("package", "p4src", "models"):
        assert Path(got[key]).is_relative_to(site), (key, got[key])
    assert got["checkout"] == "None"
    from gradswitch.experiment.compare import load_spec
    from gradswitch.experiment.shipped_specs import EXPERIMENTS
    from gradswitch.protocol.p4_constants import CONFIG
    from gradswitch.sim.build import sources
    from gradswitch.workload.gradients import workload_names

    assert got["port"] == CONFIG.ROCE_V2_UDP_PORT
    assert got["workloads"] == workload_names()
    assert got["runs"] == len(load_spec(EXPERIMENTS / "baselines.toml").runs)
    assert got["sources"] == len(sources())
    assert Path(got["sim_build"]).is_relative_to(user_cache_dir())


def test_doctor_json(installed):
    proc = installed.gradswitch("doctor", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == (0 if report["ok"] else 1), proc.stderr
    program = next(c for c in report["checks"] if c["name"] == "compiled program")
    assert program["ok"], program
    assert str(installed.venv) in program["version"]


def test_build_refuses_to_write_into_the_installed_package(installed):
    proc = installed.gradswitch("build")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "belongs to the installed package" in proc.stderr, proc.stderr


def test_experiment_lists_the_shipped_model_profiles(installed):
    proc = installed.gradswitch("experiment", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "resnet50" in proc.stdout and "train-digits" in proc.stdout


JOB = ["--algo", "ring", "--workers", "4", "--topo", "rack", "--size", "1MiB", "--bw", "20", "--iterations", "2"]


@pytest.mark.ns3
def test_experiment_on_ns3_builds_the_simulator_on_first_use(installed, tmp_path):
    have = installed.python("import ns3")
    if have.returncode != 0:
        installed.run(str(installed.venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
                      NS3_WHEEL, timeout=900)
    proc = installed.gradswitch("experiment", *JOB, "--backend", "ns3", "--out", str(tmp_path / "run"), timeout=1500)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "run" / "results.json").is_file()


@pytest.mark.mininet
def test_experiment_on_bmv2_with_the_shipped_program(installed, tmp_path):
    proc = installed.gradswitch("experiment", *JOB, "--out", str(tmp_path / "run"), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "run" / "results.json").is_file()


def test_the_wheel_holds_one_top_level_package(wheel):
    """Everything the product ships is under `gradswitch`: the wheel's files have no other first folder, and its
    package data are real files (no links), the test harnesses stay out."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"gradswitch"}, tops
    for needed in ("gradswitch/p4src/build/gradswitch.json", "gradswitch/specs/baselines.toml",
                   "gradswitch/sim/ns3/CMakeLists.txt", "gradswitch/workload/models/resnet50.json"):
        assert needed in names, needed
    assert not [n for n in names if "qp_script" in n or "gs-qp-script" in n or n.endswith("/fuzz.py")]


def test_installs_beside_pypis_topology_and_workers_and_uninstalls_leaving_them_whole(wheel, tmp_path):
    """Two of the names the project's folders once had at the top level belong to other PyPI packages (`topology`,
    a network-topology framework, and `workers`). gradswitch's wheel installs beside them, each still imports as it
    did (PyPI's `workers` 0.1 is Python 2 code: it fails to import on any Python 3, alone as beside gradswitch,
    and that failure is the same), and uninstalling gradswitch leaves both whole, file for file."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = str(env_dir / "bin" / "python")
    pip = [py, "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run([*pip, "topology", "workers"], check=True, timeout=900)
    before = _probe(py, tmp_path)
    assert before["topology"]["imports"] == "ok", before
    assert before["workers"]["origin"].endswith("site-packages/workers/__init__.py"), before
    subprocess.run([*pip, str(wheel)], check=True, timeout=600)
    beside = _probe(py, tmp_path)
    assert beside == before
    # --no-deps: only the package's own files are at stake; importing its root and its parts needs none of them
    proc = subprocess.run([py, "-c", "import gradswitch, gradswitch.topology, gradswitch.hosts; print('ok')"],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert proc.stdout.strip() == "ok", proc.stderr
    subprocess.run([py, "-m", "pip", "uninstall", "--quiet", "--yes", "gradswitch"], check=True, timeout=300)
    assert _probe(py, tmp_path) == before


def _probe(python: str, cwd: Path) -> dict[str, dict[str, str]]:
    """Of PyPI's topology and workers: each installed .py file's SHA-256 (their RECORD's list), where the import
    system finds the package, and what importing it gives ("ok" or the exception's type)."""
    code = ("import hashlib, importlib, importlib.util, json\nfrom importlib.metadata import files\nout = {}\n"
            "for name in ('topology', 'workers'):\n"
            "    record = {}\n"
            "    for f in files(name) or []:\n"
            "        p = f.locate()\n"
            "        if p.is_file() and p.suffix == '.py':\n"
            "            record[str(f)] = hashlib.sha256(p.read_bytes()).hexdigest()\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "        imports = 'ok'\n"
            "    except Exception as e:\n"
            "        imports = type(e).__name__\n"
            "    out[name] = {'files': json.dumps(record, sort_keys=True), 'origin': str(spec and spec.origin),\n"
            "                 'imports': imports}\n"
            "print(json.dumps(out))")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=cwd, check=True)
    found: dict[str, dict[str, str]] = json.loads(proc.stdout)
    assert all(json.loads(v["files"]) for v in found.values()), found
    return found
