"""The command line as a newcomer meets it: --version, a description and examples on every
subcommand (examples that parse and describe a runnable spec), the global options before or
after the subcommand, shell completion that completes, and `experiment --spec FILE.toml`."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gradswitch.cli.main import COMPLETION_SHELLS, build_parser, experiment_spec
from gradswitch.experiment.spec import ExperimentSpec, SpecError, load_experiment
from gradswitch.protocol.paths import REPO_ROOT
from gradswitch.version import code_version, package_version
from tests.require import need_tool

GRADSWITCH = [sys.executable, "-m", "gradswitch.cli.main"]


def run(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GRADSWITCH, *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def help_text(*args: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args([*args, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def examples(help_out: str) -> list[str]:
    """The example command lines of a --help (the indented lines after `examples:`)."""
    assert "\nexamples:\n" in help_out, help_out
    block = help_out.split("\nexamples:\n", 1)[1]
    return [line.strip() for line in block.splitlines() if line.startswith("  ")]


def test_version_prints_the_package_version_and_git_describe():
    result = run("--version")
    assert result.returncode == 0, result.stderr
    # (-dirty aside: another hand may touch the checkout between the two calls)
    assert result.stdout.strip().removesuffix("-dirty") == f"gradswitch {code_version()}".removesuffix("-dirty")
    assert result.stdout.startswith(f"gradswitch {package_version()}")
    assert result.stderr == ""


def test_no_command_is_one_line_listing_the_commands():
    result = run()
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line == f"gradswitch: error: give a command: {', '.join(subcommands())} (see `gradswitch --help`)"
    assert line.startswith("gradswitch: error: give a command: doctor, build, net, repl"), line


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_has_a_description_and_examples_that_parse(name, capsys):
    out = help_text(name, capsys=capsys)
    description = out.split("\n\n")[1]  # after the usage paragraph
    assert not description.lstrip().startswith(("options:", "positional arguments:")), \
        f"`gradswitch {name} --help` has no description"
    assert len(description.split()) >= 5, description
    lines = examples(out)
    commands = [line for line in lines if line.startswith("gradswitch ")]
    assert commands, f"`gradswitch {name} --help` shows no example starting with `gradswitch {name}`"
    for line in commands:
        words = shlex.split(line, comments=True)
        words = words[: words.index(">")] if ">" in words else words
        assert words[1] == name, line
        args = build_parser().parse_args(words[1:])  # an example that does not parse fails here (SystemExit)
        if name == "experiment" and args.spec is None:
            experiment_spec(args)  # and one whose values cannot run fails here (SpecError)


def test_the_main_help_lists_every_command_and_a_first_experiment(capsys):
    out = help_text(capsys=capsys)
    for name in subcommands():
        assert f"\n    {name} " in out, name
    assert "gradswitch experiment --backend ns3" in out


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_global_options_are_taken_before_and_after_every_subcommand(name):
    parser = build_parser()
    # the command's positional arguments: a choice where it has choices, else a word
    needed = [str(next(iter(a.choices))) if a.choices else "word" for a in subcommands()[name]._actions
              if not a.option_strings and a.nargs not in ("?", "*")]
    plain = parser.parse_args([name, *needed])
    assert (plain.verbose, plain.bmv2) == (False, None)
    for argv in (["-v", "--bmv2", "/opt/bmv2", name, *needed], [name, *needed, "-v", "--bmv2", "/opt/bmv2"],
                 ["--verbose", name, *needed, "--bmv2=/opt/bmv2"]):
        args = parser.parse_args(argv)
        assert (args.verbose, args.bmv2) == (True, "/opt/bmv2"), argv


def test_verbose_after_the_subcommand_shows_the_traceback():
    result = run("experiment", "--workers", "0", "-v")
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert result.stderr.rstrip().endswith("\nerror: workers = 0: give at least 1 worker")


def test_bmv2_after_the_subcommand_is_honoured():
    result = run("doctor", "--bmv2", "/nonexistent/simple_switch_grpc")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --bmv2 /nonexistent/simple_switch_grpc: /nonexistent/simple_switch_grpc does not exist"]


# ---- shell completion ----


def completions(script: Path, *words: str) -> list[str]:
    """What bash completes for the command line `words` (the last one being typed)."""
    line = " ".join(words)
    program = (f"source {shlex.quote(str(script))}\n"
               "complete -p gradswitch\n"
               f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
               f"COMP_CWORD={len(words) - 1}\nCOMP_LINE={shlex.quote(line)}\nCOMP_POINT={len(line)}\n"
               f"_shtab_gradswitch gradswitch {shlex.quote(words[-1])} {shlex.quote(words[-2])}\n"
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, timeout=30,
                         check=True).stdout.splitlines()
    assert out[0] == "complete -o bashdefault -F _shtab_gradswitch gradswitch", out
    return out[1:]


def test_bash_completes_subcommands_options_and_choices(tmp_path, monkeypatch):
    need_tool("bash", "no bash to complete in")  # fails instead with GRADSWITCH_REQUIRE_TOOLCHAIN=1
    result = run("completion", "bash")
    assert result.returncode == 0, result.stderr
    script = tmp_path / "gradswitch.bash"
    script.write_text(result.stdout)
    assert completions(script, "gradswitch", "expe") == ["experiment"]
    assert completions(script, "gradswitch", "expo") == ["export-et"]
    assert completions(script, "gradswitch", "c") == ["compare", "check-et", "clean", "completion"]
    assert completions(script, "gradswitch", "experiment", "--back") == ["--backend"]
    assert completions(script, "gradswitch", "experiment", "--backend", "") == ["bmv2", "ns3"]
    assert "-v" in completions(script, "gradswitch", "doctor", "-")  # a global option after the command
    (tmp_path / "run.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    assert completions(script, "gradswitch", "experiment", "--spec", "ru") == ["run.toml"]


@pytest.mark.parametrize("shell", COMPLETION_SHELLS)
def test_every_shell_gets_a_script_that_knows_the_commands(shell):
    result = run("completion", shell)
    assert result.returncode == 0, result.stderr
    for name in subcommands():
        assert name in result.stdout, (shell, name)


def test_an_unknown_shell_is_one_line():
    result = run("completion", "fish")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "argument shell: invalid choice: 'fish'" in line


# ---- experiment --spec FILE.toml ----

RUN = """\
# one run, the keys of a compare spec's [[runs]]
algo = "ring"
workers = 4
topo = "rack"
size_bytes = 1048576
bw_mbps = 20
iterations = 2
transport = "sr"
sim = { check = "digest", link_delay_us = 2.5 }
"""
SAME_OPTIONS = ["--algo", "ring", "--workers", "4", "--topo", "rack", "--size", "1MiB", "--bw", "20", "--iterations",
                "2", "--transport", "sr", "--check", "digest", "--link-delay-us", "2.5"]


def spec_of(*argv: str) -> ExperimentSpec:
    return experiment_spec(build_parser().parse_args(["experiment", *argv]))


def test_a_spec_file_runs_what_the_same_options_run(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(RUN)
    from_file = spec_of("--spec", str(path))
    assert from_file == spec_of(*SAME_OPTIONS)
    assert from_file != ExperimentSpec()
    assert (from_file.network.sim.check, from_file.network.sim.link_delay_us,
            from_file.workload.size_bytes) == ("digest", 2.5, 1 << 20)


def test_options_beside_a_spec_file_override_its_values_key_by_key(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(RUN)
    spec = spec_of("--spec", str(path), "--workers", "8", "--backend", "ns3", "--link-delay-us", "7")
    expected = spec_of(*SAME_OPTIONS, "--workers", "8", "--backend", "ns3", "--link-delay-us", "7")
    assert spec == expected
    net = spec.network
    assert (net.workers, net.sim.link_delay_us, net.sim.check) == (8, 7.0, "digest")  # the file's check kept


@pytest.mark.parametrize(("text", "says"), [
    ("wrkers = 4\n", "{path}: wrkers: no such key; did you mean workers (under [network])?"),
    ("workers = 0\n", "{path}: workers = 0: give at least 1 worker"),
    ('bw_mbps = "fast"\n', "{path}: bw_mbps = 'fast': a number"),
    ('algo = "nccl"\n', "{path}: algo = 'nccl': one of ring, ps, netreduce"),
    ("sim = { chek = 'digest' }\n", "{path}: sim.chek: no such key; did you mean check?"),
    ("algo = ring\n", "{path}: not valid TOML: "),
    ('name = "m"\n[matrix]\nalgo = ["ring", "ps"]\n', "{path}: this is a compare spec (defaults, matrix, runs): run it "
     "with `gradswitch compare {path}`"),
])
def test_a_bad_spec_file_is_one_line_naming_the_file_the_key_and_what_is_allowed(tmp_path, text, says):
    path = tmp_path / "run.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as e:
        load_experiment(path)
    assert str(e.value).startswith(says.format(path=path)), str(e.value)
    result = run("experiment", "--spec", str(path), cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line == f"error: {e.value}"


def test_the_file_is_named_only_for_its_own_bad_values(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("workers = 0\nloss_pct = 5\n")
    result = run("experiment", "--spec", str(path), "--loss", "150", "--scale", "2", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {path}: workers = 0: give at least 1 worker",  # section by section: [network], [workload], ...
        "error: scale = 2.0: a layer-size fraction is 0 < scale <= 1",
        "error: loss_pct (--loss) = 150.0: a loss rate is 0 <= percent < 100"]


def test_an_option_may_mend_a_value_of_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("workers = 0\n")
    assert spec_of("--spec", str(path), "--workers", "2").network.workers == 2


def test_a_missing_spec_file_is_one_line(tmp_path):
    result = run("experiment", "--spec", "nosuch.toml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: nosuch.toml: no such file"]


@pytest.mark.parametrize(("args", "says"), [
    (["experiment", "--wrokers", "3"], "gradswitch experiment: error: unrecognized arguments: --wrokers 3: did you "
     "mean --workers? (see `gradswitch experiment --help`)"),
    (["net", "--pcaps"], "gradswitch net: error: unrecognized arguments: --pcaps: did you mean --pcap? (see "
     "`gradswitch net --help`)"),
    (["clean", "now"], "gradswitch clean: error: unrecognized arguments: now (see `gradswitch clean --help`)"),
])
def test_an_unknown_option_is_named_by_its_command_with_the_nearest_one(args, says):
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [says]
