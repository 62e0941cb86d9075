"""
The two reward-model schedules on dm_control data, round by round, without the policy in the loop.

Transitions of a random policy on a dm_control task (the same for both schedules) fill a
``PreferenceLearner``; then ``--rounds`` query rounds of ``--re-batch`` oracle labels each (disagreement
queries, segments of 50, ``re_update`` 100) train the reward model with ``reward_schedule="auto"`` and with
``"bpref"``. After every round: agreement with an oracle on 2000 fresh pairs, the correlation of predicted
with true per-step rewards, gradient steps and CPU seconds of the round::

    python -m benchmarks schedule_dmc schedules --env walker_walk --rounds 10 \\
        --output benchmarks/schedule_dmc/schedule_dmc_walker_walk.md
"""

import argparse
import datetime
import os
import platform
import time

import numpy as np
import torch as th

from benchmarks import machine
from benchmarks.study import Option, probe, shared
from sb3_pref import PreferenceLearner, RewardModel
from sb3_pref.core.teachers import ScriptedTeacher
from sb3_pref.envs import make_vec_dmcontrol_env


def collect(env_id: str, n_envs: int, steps: int, seed: int) -> tuple[np.ndarray, ...]:
    env = make_vec_dmcontrol_env(env_id, n_envs=n_envs, seed=seed)
    rng = np.random.default_rng(seed)
    obs = env.reset()
    rows: list[tuple[np.ndarray, ...]] = []
    for _ in range(steps // n_envs):
        actions = rng.uniform(-1, 1, size=(n_envs, *env.action_space.shape)).astype(np.float32)
        next_obs, rewards, dones, _ = env.step(actions)
        rows.append((obs, actions, rewards.astype(np.float32), dones))
        obs = next_obs
    env.close()
    return tuple(np.stack(column) for column in zip(*rows))


@probe(
    "schedules",
    "the two reward-model schedules on a random policy's dm_control data, round by round",
    shared("env", default="walker_stand"),
    shared("seed"),
    Option("--steps", "env steps of the random policy", type=int, default=16_000),
    Option("--rounds", "query rounds", type=int, default=5),
    Option("--re-batch", "oracle labels per round", type=int, default=100),
    Option(
        "--variants",
        "schedule:hidden_dim:n_layers:lr, e.g. auto:64:2:1e-3 (the defaults) bpref:256:3:3e-4 (B-Pref's model)",
        nargs="+",
        default=["auto:64:2:1e-3", "bpref:256:3:3e-4"],
    ),
    shared("output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "schedule_dmc.md")),
)
def schedules(args: argparse.Namespace) -> None:
    """
    After every round: agreement with an oracle, the correlation with the true reward, gradient steps and CPU.

    :param args: the options
    """
    th.set_num_threads(1)
    load_before = os.getloadavg()[0]
    obs, actions, rewards, dones = collect(args.env, 4, args.steps, args.seed)
    flat_obs, flat_actions, flat_true = (x.reshape(-1, *x.shape[2:]) for x in (obs, actions, rewards))
    rows = {}
    for variant in args.variants:
        schedule, hidden, layers, lr = variant.split(":")
        model = RewardModel(
            obs.shape[-1], actions.shape[-1], mb_size=args.re_batch, hidden_dim=int(hidden), n_layers=int(layers),
            lr=float(lr), seed=args.seed,
        )  # fmt: skip
        teacher = ScriptedTeacher.preset("oracle", seed=args.seed)
        learner = PreferenceLearner(
            model,
            n_envs=4,
            teacher=teacher,
            feed_type="disagreement",
            max_feed=args.re_batch * args.rounds,
            re_update=100,
            schedule=schedule,
            seed=args.seed,
        )
        learner.add_transitions(obs, actions, rewards, dones)
        rows[variant] = []
        for _ in range(args.rounds):
            cpu = time.process_time()
            stats = learner.query_round()
            cpu = time.process_time() - cpu
            corr = float(np.corrcoef(learner.predict_rewards(flat_obs, flat_actions), flat_true)[0, 1])
            rows[variant].append((len(learner.dataset), stats["model_train_steps"], cpu, learner.oracle_agreement(2000), corr))
            print(variant, rows[variant][-1], flush=True)
    cpu_name = machine.cpu_name()
    lines = [
        f"# Reward-model schedules on {args.env} data (random policy), round by round",
        "",
        f"Measured {datetime.date.today().isoformat()} with `benchmarks/schedule_dmc/schedule_dmc.py` "
        f"(torch {th.__version__}, Python "
        f"{platform.python_version()}, 1 torch thread), CPU: {cpu_name}, 2 cores; load average {load_before:.1f} before / "
        f"{os.getloadavg()[0]:.1f} after: **the machine was shared with other jobs**; CPU seconds are this process's.",
        "",
        f"{args.steps} transitions of a uniformly random policy (4 envs, seed {args.seed}); {args.rounds} rounds of "
        f"{args.re_batch} oracle labels (disagreement queries, segments of 50); reward model of 3 members, "
        "`schedule:width:layers:lr` as in each column's name, batch 128, re_update 100, float32. Agreement: with an "
        "oracle on 2000 fresh pairs; corr: predicted against true per-step reward on all transitions.",
        "",
        "| labels | " + " | ".join(f"{v}: steps | {v}: CPU (s) | {v}: agreement | {v}: corr" for v in rows) + " |",
        "|---|" + "---|---|---|---|" * len(rows),
    ]
    for i in range(args.rounds):
        cells = [f"{r[i][1]:.0f} | {r[i][2]:.1f} | {r[i][3]:.3f} | {r[i][4]:.3f}" for r in rows.values()]
        lines.append(f"| {next(iter(rows.values()))[i][0]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Totals: "
        + "; ".join(
            f"{v} {sum(r[1] for r in rs):.0f} gradient steps, {sum(r[2] for r in rs):.1f} s CPU" for v, rs in rows.items()
        )
        + " (rounds include query selection and the oracle metric).",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    with open(args.output, "w") as file:
        file.write(report)
