"""Every example answers ``--help`` with its options and exits 0, without starting a run."""

import glob
import json
import os
import subprocess
import sys

import pytest

from sb3_pref.experiments.pebble import PEBBLE_DEFAULTS, PEBBLE_TASKS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON_EXAMPLES = sorted(glob.glob(os.path.join(REPO, "examples", "*.py")))
# common.sh is sourced by the grid scripts, not run.
SHELL_EXAMPLES = [
    path for path in sorted(glob.glob(os.path.join(REPO, "examples", "scripts", "*.sh"))) if not path.endswith("common.sh")
]
PEBBLE = os.path.join(REPO, "examples", "train_PEBBLE.py")
BAD_PEBBLE_OVERRIDE = (sys.executable, PEBBLE, "max_feedback")
# One worker runs the module, so the examples are started once, not once per worker (scripts/test.sh: loadgroup).
pytestmark = pytest.mark.xdist_group("examples")


#: Runs each Python example's command line as ``python example.py ...`` would (``__main__``, its folder first on the
#: path, its own working folder), one after another in one interpreter: torch and SB3 are imported once, not once per
#: example (the fixture's cost was nine interpreters importing torch). Prints each result as JSON.
RUN_EXAMPLES = r"""
import contextlib, io, json, os, runpy, sys, traceback
results = []
for path, folder, *arguments in json.loads(sys.argv[1]):
    os.chdir(folder)
    sys.argv = [path, *arguments]
    sys.path.insert(0, os.path.dirname(path))
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BaseException:
            traceback.print_exc()
            code = 1
    sys.path.pop(0)
    results.append((code, out.getvalue(), err.getvalue()))
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict[tuple[str, ...], tuple[int, str, str, list[str]]]:
    """
    Each example run with ``--help``: the shell ones each in its own process, all at once; the Python ones in one
    interpreter beside them (:data:`RUN_EXAMPLES`).

    :return: ``{command: (exit code, stdout, stderr, what the command left in its working folder)}``
    """
    python_commands = [(sys.executable, path, "--help") for path in PYTHON_EXAMPLES] + [BAD_PEBBLE_OVERRIDE]
    shell_commands = [("bash", path, "--help") for path in SHELL_EXAMPLES]
    path = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    folders = {command: tmp_path_factory.mktemp("cwd") for command in python_commands + shell_commands}
    jobs = json.dumps([[command[1], str(folders[command]), *command[2:]] for command in python_commands])
    python = subprocess.Popen(
        [sys.executable, "-c", RUN_EXAMPLES, jobs], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    shells = [
        subprocess.Popen(command, cwd=folders[command], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for command in shell_commands
    ]
    results = {}
    for command, process in zip(shell_commands, shells):
        stdout, stderr = process.communicate(timeout=600)
        results[command] = (process.returncode, stdout, stderr, os.listdir(folders[command]))
    stdout, stderr = python.communicate(timeout=600)
    assert python.returncode == 0, stderr[-3000:]
    for command, (code, out, err) in zip(python_commands, json.loads(stdout.splitlines()[-1])):
        results[command] = (code, out, err, os.listdir(folders[command]))
    return results


def test_every_example_is_covered():
    names = {os.path.basename(path) for path in PYTHON_EXAMPLES + SHELL_EXAMPLES}
    assert {"train_PEBBLE.py", "train_PrefPPO.py", "quickstart.py", "run_walker_walk.sh", "smoke.sh"} <= names


@pytest.mark.parametrize("path", PYTHON_EXAMPLES, ids=os.path.basename)
def test_python_example_answers_help(path, answers):
    returncode, stdout, stderr, left = answers[(sys.executable, path, "--help")]
    assert returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    assert stdout.startswith("usage: ") and "-h, --help" in stdout
    assert left == []  # nothing ran


def test_train_pebble_help_lists_bpref_settings_with_their_defaults(answers):
    # It ended in a ValueError traceback (issue 26): its arguments are B-Pref's key=value overrides.
    returncode, stdout, stderr, _ = answers[(sys.executable, PEBBLE, "--help")]
    assert returncode == 0, stderr[-3000:]
    listed = stdout.split()
    for key, default in PEBBLE_DEFAULTS.items():
        assert f"{key}={default}" in listed, key
    for task in PEBBLE_TASKS:
        assert f"env={task}:" in listed, task
    assert "agent.params.actor_lr=0.0005" in stdout.split("env=walker_walk:")[1].split("env=")[0]
    # A malformed override is a usage error, not a traceback.
    returncode, _, stderr, _ = answers[BAD_PEBBLE_OVERRIDE]
    assert returncode == 2 and "usage: " in stderr and "Traceback" not in stderr
    assert "key=value" in stderr.splitlines()[-1]


@pytest.mark.parametrize("path", SHELL_EXAMPLES, ids=os.path.basename)
def test_shell_example_answers_help(path, answers):
    returncode, stdout, stderr, left = answers[("bash", path, "--help")]
    assert returncode == 0, stderr[-3000:]
    # The script's own header; the grid scripts add their knobs. ">>>" would mean a run was launched.
    assert os.path.basename(path) in stdout and ">>>" not in stderr and left == []
    if os.path.basename(path).startswith("run_"):
        assert "ALGOS" in stdout and "DRY_RUN=1" in stdout
