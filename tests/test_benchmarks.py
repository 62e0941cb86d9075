"""
The studies' one command line (``python -m benchmarks``, :mod:`benchmarks.study`): every study's probes load and
parse their defaults, the listing names them, a bad name is a usage error, and no study script grows its own
command line again.
"""

import argparse
import glob
import os
import subprocess
import sys

import pytest

from benchmarks import study
from benchmarks.__main__ import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: scripts that jobs invoke by path, through a shim to their probe: ``--help`` and the probe that answers it
BY_PATH = {
    "benchmarks/defaults/run.py": ("--help", "python -m benchmarks defaults run"),
    "benchmarks/quality/protocol.py": ("report --help", "python -m benchmarks quality report"),
    "benchmarks/ad/ad_model_seed.py": ("--help", "python -m benchmarks ad model-seed"),
    "benchmarks/ad/ad_trials.py": ("--help", "python -m benchmarks ad trials"),
}


def test_no_study_script_has_its_own_command_line():
    scripts = glob.glob(os.path.join(REPO, "benchmarks", "**", "*.py"), recursive=True)
    own = set()
    for path in scripts:
        with open(path, encoding="utf-8") as handle:
            if "ArgumentParser(" in handle.read():
                own.add(os.path.relpath(path, REPO).replace(os.sep, "/"))
    assert own == {"benchmarks/study.py"}


@pytest.mark.parametrize("script", sorted(BY_PATH))
def test_scripts_that_jobs_run_by_path_still_answer_there(script):
    flags, usage = BY_PATH[script]
    result = subprocess.run([sys.executable, script, *flags.split()], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {usage}")


@pytest.mark.parametrize("name", study.studies())
def test_every_probe_loads_and_parses(name):
    probes = study.load(name)
    for probe_name, found in probes.items():
        assert found.study == name and found.name == probe_name
        assert found.help and "\n" not in found.help, probe_name
        assert found.run.__doc__, f"{name} {probe_name}: the probe's docstring is its --help description"
        parser = found.parser()
        flags = [action for action in parser._actions if action.dest != "help"]
        assert len({action.dest for action in flags}) == len(flags), f"{name} {probe_name}: an option twice"
        # A probe without required arguments parses its defaults; the others need them.
        if not any(action.required for action in flags):
            assert isinstance(found.parse([]), argparse.Namespace)


def test_listing_names_the_studies_and_their_probes(capsys):
    assert main([]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in study.studies())
    assert "benchmarks/bpref_small.yaml" in listing
    assert main(["pebble"]) == 0
    listing = capsys.readouterr().out
    assert "iqm" in listing and "benchmarks/pebble/pebble_quality.yaml" in listing


def test_a_bad_name_is_a_usage_error(capsys):
    assert main(["no_such_study"]) == 2
    assert "no study 'no_such_study'" in capsys.readouterr().err
    assert main(["pebble", "no_such_probe"]) == 2
    assert "its probes: " in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main(["overhead", "return-gap"])  # neither --variant nor --table: the probe's UsageError
    assert stopped.value.code == 2
    assert "give --variant" in capsys.readouterr().err


def test_shared_options_change_only_what_the_probe_says():
    seeds = study.shared("seeds", default=[1])
    assert seeds.flag == "--seeds" and seeds.type is int and seeds.nargs == "+" and seeds.default == [1]
    assert study.SHARED["seeds"].default is None
    with pytest.raises(KeyError, match="no shared option"):
        study.shared("seed_count")


def test_a_probe_outside_a_study_is_refused():
    def stray(args: argparse.Namespace) -> None:
        """Not in a study's folder."""

    with pytest.raises(ValueError, match=r"benchmarks/<study>/<module>\.py"):
        study.probe("stray", "nothing")(stray)


def test_overhead_settings_are_shared_by_its_probes():
    from benchmarks.overhead import overhead

    args = overhead.settings(["--n-epochs", "7"])
    assert args.unsuper_n_epochs == 7 and args.total_timesteps == 96_000 and args.output.endswith("overhead.md")
    with pytest.raises(study.UsageError, match="at least one rollout"):
        overhead.settings(["--total-timesteps", "10"])
    side = study.get("overhead", "side-by-side").parse([])
    assert vars(side).keys() - {"variants"} == vars(study.get("overhead", "overhead").parse([])).keys()


def test_a_probe_reads_the_committed_results(capsys):
    # the quality grid's finished study: README.md's first table, from the committed runs
    assert main(["quality_grid", "tables"]) == 0
    assert "| cartpole_balance | 120k | 544.3 / 997.4 (n=5) | 1000 (n=5) | 0.93 [0.65, 0.98] |" in capsys.readouterr().out


def test_cpu_against_ppo_pairs_runs_on_one_machine_only():
    """Seconds on two CPUs are not compared: a seed whose PPO run trained elsewhere drops out of the ratio."""
    from benchmarks.defaults.table import cpu_cells

    fast, slow = "AMD EPYC (AVX512-BF16)", "x86_64"  # the second: a run written before the name carried the ISA
    arm = {101: {"cpu_seconds": 60.0, "cpu_model": fast}, 102: {"cpu_seconds": 300.0, "cpu_model": slow}}
    ppo = {101: {"cpu_seconds": 40.0, "cpu_model": fast}, 102: {"cpu_seconds": 100.0, "cpu_model": fast}}
    cpu, ratio = cpu_cells(arm, ppo)
    assert cpu == "300 (AVX2 only); 60 (AVX512-BF16)"
    assert ratio == "1.50 (n=1)"  # 60 / 40; the 3.00 of seed 102 would mix two machines
    ppo[102]["cpu_model"] = slow
    assert cpu_cells(arm, ppo)[1] == "2.25"  # (1.5 + 3.0) / 2, each seed against its own machine's PPO


def test_the_cpu_name_carries_its_vector_instructions():
    from benchmarks.machine import cpu_name

    name = cpu_name()
    if os.path.exists("/proc/cpuinfo") and "avx2" in open("/proc/cpuinfo").read():
        assert name.endswith(("(AVX512-BF16)", "(AVX512)", "(AVX2 only)")), name
    assert name and name != "?"


def test_a_cost_set_is_the_arm_its_plain_arm_and_ppo_each_once():
    from benchmarks.successors.cost import cost_arms

    assert cost_arms("surf_swingup") == [
        ("cartpole_swingup", "ppo", "protocol"),
        ("cartpole_swingup", "defaults_low", "protocol"),
        ("cartpole_swingup", "surf_low", "own"),
    ]
    arms = [arm for _, arm, _ in cost_arms("swingup_best")]  # a study with a PPO arm of its own
    assert sorted(arms) == sorted(set(arms)) and arms.count("ppo") == 1


def test_a_label_window_arm_plans_its_own_window_and_leaves_the_library_s():
    """The defaults study's label-window candidates: the plan inside asks its last label at that share of the run."""
    from benchmarks.defaults.run import plan_window
    from sb3_pref.core import feedback_plan

    default = feedback_plan.LABEL_WINDOW

    def last_label(window):
        with plan_window(window):
            plan = feedback_plan.plan_feedback("auto", "on_policy", 1_000_000, 1000, 4000, {})
        return plan.rounds()[-1][0], sum(n for _, n in plan.rounds())

    assert last_label(None) == (328_000, 1000)  # the README snippet's plan: the last of 8 rounds by a third
    assert last_label(2 / 3) == (680_000, 1000)
    assert last_label(0.9) == (904_000, 1000)
    assert feedback_plan.LABEL_WINDOW == default
    with pytest.raises(RuntimeError), plan_window(0.5):
        raise RuntimeError("a run that fails still gives the window back")
    assert feedback_plan.LABEL_WINDOW == default


def test_the_reward_shape_look_scores_a_faithful_reward_high_and_a_flat_top_low():
    """reward_shape.look: a reward equal to the true one orders every segment pair; one flat above 0.3 loses the
    pairs that differ only above it, and its tenths show where it stops rising."""
    import numpy as np

    from benchmarks.defaults.reward_shape import look

    rng = np.random.default_rng(3)
    # per env a level drifting slowly through [0, 1], as a policy's per-step reward does over a rollout
    true = np.clip(np.cumsum(rng.normal(0.0, 0.05, size=(500, 8)), axis=0) + rng.uniform(0, 1, size=8), 0.0, 1.0)
    faithful = look(true.copy(), true, np.random.default_rng(0))
    assert faithful["segment_agreement"] == 1.0 and faithful["pearson"] > 0.999
    tenths = faithful["by_tenth"]
    assert all(tenth / 10 <= v <= (tenth + 1) / 10 for tenth, v in enumerate(tenths) if v is not None)
    assert sum(v is not None for v in tenths) >= 8
    flat_top = look(np.minimum(true, 0.3), true, np.random.default_rng(0))
    above = flat_top["by_tenth"][3:]
    assert all(v is None or abs(v - 0.3) < 1e-6 for v in above) and any(v is not None for v in above)
    assert flat_top["segment_agreement"] < 0.9 < faithful["segment_agreement"]
    reversed_ = look(-true, true, np.random.default_rng(0))
    # only pairs tied in truth (both segments held at 0 or 1 throughout) count as agreeing
    assert reversed_["segment_agreement"] < 0.1 and reversed_["pearson"] < -0.999
