"""
Wall-clock cost of preference learning: ``PPO_REWARD`` (oracle teacher, disagreement queries,
state-entropy pretraining, ``learn(unsuper_flag=1)``) against SB3's ``PPO`` on the true reward,
same env, steps, seed and PPO hyperparameters, in one process. The two are alternated (the order
flips every repeat, so drifting machine load hits both alike) and the median ratio is reported.

The settings are a scaled-down B-Pref walker_walk run: B-Pref's networks, rollout length, gSDE and
observation normalisation, with 16 envs and ~100k steps. With 100 queries every 16000 steps, this
is what the first ~200k steps of a B-Pref run look like, where all of its 10 query rounds happen;
over a full 4M-step run the rounds are amortised 20-40 times more.

A per-phase breakdown is measured by wrapping library methods from the outside (no library edit):
rollouts (env + policy), transition recording, the k-NN entropy reward, query rounds (selection,
teacher, reward-model training), relabelling, and the PPO update.

    nice -n 10 python -m benchmarks overhead overhead                   # ~10-15 min on one core
    python -m benchmarks overhead overhead --total-timesteps 16000 --repeats 1 --output /tmp/quick.md
"""

import argparse
import datetime
import functools
import os
import statistics
import time
from collections import defaultdict
from typing import Any, Callable

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecNormalize

from benchmarks.overhead.report import markdown
from benchmarks.study import Option, UsageError, parse, probe, shared
from sb3_pref import PPO_REWARD, PreferenceLearner, RewardModel
from sb3_pref.common import rollout_writer
from sb3_pref.common.controller import PHASE_PRETRAIN
from sb3_pref.common.onpolicy import PreferenceRewardMixin
from sb3_pref.common.rollout import RolloutRecorder
from sb3_pref.core import pair_draws
from sb3_pref.core.entropy import StateEntropyReward
from sb3_pref.core.reward_model import BPREF_N_LAYERS
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.envs import make_vec_dmcontrol_env

# Breakdown rows: (label, how the value is derived from the raw timers). Raw timers nest
# (query rounds run inside a rollout), so the exclusive rows are differences.
PHASES = [
    ("rollout: env + policy", "collect - recorder - begin - finish"),
    ("rollout: recording transitions", "recorder"),
    ("pretraining: k-NN entropy reward", "entropy"),
    ("reward model: query rounds", "query_round"),
    ("    of which reward-model training", "reward_train"),
    ("    of which query selection", "select"),
    ("    of which oracle-agreement metric", "agreement"),
    ("relabel: reward prediction", "predict"),
    ("relabel: rewrite buffer + advantages", "relabel"),
    ("other preference bookkeeping", "begin + finish - entropy - query_round - predict - relabel"),
    ("PPO update", "train"),
    ("PPO update while pretraining", "train_pretrain"),
    ("rest of learn() (logging, schedules)", "learn - collect - train - train_pretrain"),
]


class PhaseTimer:
    """Accumulates wall-clock seconds per name for functions wrapped with :meth:`wrap`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def wrap(self, name: str, function: Callable[..., Any], name_of: Callable[[], str] = lambda: "") -> Callable[..., Any]:
        """
        :param name: timer the call's duration is added to
        :param function: the function to time
        :param name_of: optional, evaluated before the call: a different timer name for this call
        """

        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            key = name_of() or name
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - start
                self.calls[key] += 1

        return timed

    def patch(self, owner: Any, attribute: str, name: str) -> None:
        """Replace ``owner.attribute`` (a class's method or a module's function) by its timed version."""
        setattr(owner, attribute, self.wrap(name, getattr(owner, attribute)))

    def phase(self, expression: str) -> float:
        """Evaluate ``"a - b + c"`` over the timers (unknown names count 0)."""
        total, sign = 0.0, 1.0
        for token in expression.split():
            if token in "+-":
                sign = 1.0 if token == "+" else -1.0
            else:
                total += sign * self.seconds.get(token, 0.0)
        return total


TIMER = PhaseTimer()
# What each query round of the current run returned, with the number of labels it trained on.
ROUND_STATS: list[dict[str, float]] = []


def record_round_stats(query_round: Callable[..., dict[str, float]]) -> Callable[..., dict[str, float]]:
    """Wrap ``PreferenceLearner.query_round`` to keep its statistics (epochs, accuracies)."""

    @functools.wraps(query_round)
    def recorded(learner: PreferenceLearner, *args: Any, **kwargs: Any) -> dict[str, float]:
        stats = query_round(learner, *args, **kwargs)
        if stats:  # past the budget a round asks nothing and returns {}: not a round worth a table row
            ROUND_STATS.append({**stats, "labels": float(len(learner.dataset))})
        return stats

    return recorded


def instrument_library() -> None:
    """Wrap the preference machinery's methods once; plain PPO never calls any of them."""
    TIMER.patch(RolloutRecorder, "_on_step", "recorder")
    TIMER.patch(PreferenceRewardMixin, "_begin_rollout", "begin")
    TIMER.patch(PreferenceRewardMixin, "_finish_rollout", "finish")
    TIMER.patch(StateEntropyReward, "compute", "entropy")
    PreferenceLearner.query_round = record_round_stats(PreferenceLearner.query_round)
    TIMER.patch(PreferenceLearner, "query_round", "query_round")
    # the learner calls the module's function through the module, so patching the module attribute is enough
    TIMER.patch(pair_draws, "draw_queries", "select")
    TIMER.patch(PreferenceLearner, "oracle_agreement", "agreement")
    TIMER.patch(PreferenceLearner, "predict_rewards", "predict")
    TIMER.patch(RewardTrainer, "fit", "reward_train")
    # Looked up in the writer module's namespace at call time, so patching the module attribute is enough.
    TIMER.patch(rollout_writer, "relabel_rollout", "relabel")


def build(algo: str, args: argparse.Namespace) -> OnPolicyAlgorithm:
    """The same env and PPO hyperparameters for both algorithms; only PPO_REWARD gets preference settings."""
    env = VecNormalize(make_vec_dmcontrol_env(args.env, n_envs=args.n_envs, seed=args.seed), norm_reward=False)
    hidden = [args.hidden_dim] * args.num_layer
    sb3_style = args.ppo_style == "sb3"
    ppo_kwargs: dict[str, Any] = dict(
        seed=args.seed,
        learning_rate=args.lr,
        batch_size=args.batch_size,
        n_steps=args.n_steps,
        n_epochs=args.n_epochs,
        gae_lambda=args.gae_lambda,
        ent_coef=0.0,
        # SB3's PPO: a constant clip range and a state-independent Gaussian; B-Pref: clip annealed to 0, gSDE.
        clip_range=args.clip_init if sb3_style else LinearSchedule(args.clip_init, 0.0, 1.0),
        use_sde=not sb3_style,
        sde_sample_freq=-1 if sb3_style else 4,
        policy_kwargs=dict(net_arch=dict(pi=hidden, vf=list(hidden))),
        device="cpu",
        verbose=0,
    )
    if algo == "PPO":
        model: OnPolicyAlgorithm = PPO("MlpPolicy", env, **ppo_kwargs)
    elif args.pref_defaults:
        # What a user gets: only the round sizes and budget of the comparison are set, the reward
        # model's network, schedule, dtype, device, query selection and pretraining epochs are the defaults.
        reward_model = RewardModel(
            env.observation_space,
            env.action_space,
            size_segment=args.segment,
            mb_size=args.re_batch,
            train_dtype=args.re_train_dtype or "auto",
        )
        model = PPO_REWARD(
            reward_model,
            "MlpPolicy",
            env,
            **ppo_kwargs,
            teacher="oracle",
            num_interaction=args.num_interaction,
            max_feed=args.max_feed,
            unsuper_step=args.unsuper_step,
        )
    else:
        reward_model = RewardModel(
            env.observation_space,
            env.action_space,
            size_segment=args.segment,
            mb_size=args.re_batch,
            hidden_dim=args.re_hidden_dim,
            n_layers=BPREF_N_LAYERS,  # B-Pref's depth and learning rate: this branch measures its setup
            lr=3e-4,
            train_dtype=args.re_train_dtype or "float32",
            device="cpu",
        )
        model = PPO_REWARD(
            reward_model,
            "MlpPolicy",
            env,
            **ppo_kwargs,
            teacher="oracle",
            feed_type="disagreement",
            num_interaction=args.num_interaction,
            max_feed=args.max_feed,
            re_update=args.re_update,
            unsuper_step=args.unsuper_step,
            unsuper_n_epochs=args.unsuper_n_epochs,
            size_segment=args.segment,
            max_ep_len=1000,
            reward_schedule=args.reward_schedule,
        )
    # Instance attributes shadow the class's methods, so only this model is timed here.
    model.collect_rollouts = TIMER.wrap("collect", model.collect_rollouts)
    pretraining = getattr(model, "_rollout_phase", None)
    model.train = TIMER.wrap(
        "train",
        model.train,
        name_of=lambda: "train_pretrain" if pretraining is not None and model._rollout_phase == PHASE_PRETRAIN else "",
    )
    return model


def training_flop_per_pair(model: RewardModel) -> float:
    """Floating-point operations to train on one labelled pair for one epoch (forward + backward ~ 3 x forward)."""
    macs_per_row = model.input_dim * model.hidden_dim + (model.n_layers - 1) * model.hidden_dim**2 + model.hidden_dim
    return 3 * 2 * macs_per_row * 2 * model.size_segment * model.ensemble_size


def timed_run(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """Build, then time ``learn`` alone (wall and CPU); construction is the same for both and excluded."""
    model = build(algo, args)
    TIMER.reset()
    ROUND_STATS.clear()
    wall, cpu = time.perf_counter(), time.process_time()
    learn_kwargs = {"unsuper_flag": 1} if algo == "PrefPPO" else {}
    model.learn(total_timesteps=args.total_timesteps, **learn_kwargs)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    TIMER.seconds["learn"] = wall
    result = {
        "wall": wall,
        "cpu": cpu,
        "steps": model.num_timesteps,
        # Monitor sits under VecNormalize: these are the env's true returns for both algorithms.
        "return": float(statistics.mean(info["r"] for info in model.ep_info_buffer)),
        "phases": {label: TIMER.phase(expression) for label, expression in PHASES},
        "calls": dict(TIMER.calls),
    }
    if algo == "PrefPPO":
        learner = model.pref_learner
        result.update(
            rounds=learner.n_rounds,
            total_feed=learner.total_feed,
            round_stats=list(ROUND_STATS),
            flop_per_pair_epoch=training_flop_per_pair(model.reward_model),
        )
    model.get_env().close()
    return result


#: the settings of a timed run, which side_by_side.py and return_gap.py take too
OPTIONS: tuple[Option, ...] = (
    shared("env", default="walker_walk"),
    shared("seed"),
    Option("--n-envs", type=int, default=16),
    Option("--n-steps", type=int, default=500),
    shared("total_timesteps", default=96_000),
    Option("--lr", type=float, default=5e-5),
    Option("--batch-size", type=int, default=128),
    Option("--n-epochs", type=int, default=10),
    Option("--gae-lambda", type=float, default=0.92),
    Option("--clip-init", type=float, default=0.4),
    Option("--num-layer", type=int, default=3),
    Option("--hidden-dim", type=int, default=256),
    Option("--segment", type=int, default=50),
    Option("--unsuper-step", "one rollout of pretraining", type=int, default=8000),
    Option(
        "--unsuper-n-epochs",
        "B-Pref uses 50; equal to --n-epochs by default so the ratio measures the implementation, "
        "not B-Pref's choice to train harder on one early rollout",
        type=int,
    ),
    Option("--num-interaction", type=int, default=16000),
    Option("--max-feed", type=int, default=600),
    Option("--re-batch", type=int, default=100),
    Option("--re-update", type=int, default=100),
    Option(
        "--re-train-dtype",
        "reward-model training (default: float32, B-Pref's; with --pref-defaults the library's default, auto)",
        choices=["auto", "float32", "bfloat16"],
    ),
    Option("--reward-schedule", "reward-model schedule", choices=["auto", "bpref"], default="bpref"),
    Option("--re-hidden-dim", "reward-model width (3 layers; B-Pref: 256)", type=int, default=256),
    Option(
        "--ppo-style",
        "bpref: clip annealed to 0 and gSDE; sb3: SB3's constant clip range, no gSDE",
        choices=["bpref", "sb3"],
        default="bpref",
    ),
    Option(
        "--pref-defaults",
        "PPO_REWARD and RewardModel defaults for everything but segment, round size and interval, budget and "
        "pretraining steps (ignores --re-*, --reward-schedule, --unsuper-n-epochs)",
        action="store_true",
    ),
    shared("repeats"),
    Option("--target", type=float, default=1.15),
    shared("threads", help="torch threads, the same for both algorithms"),
    shared("output", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "overhead.md")),
)


def check(args: argparse.Namespace) -> argparse.Namespace:
    """
    Complete and check parsed :data:`OPTIONS`.

    :param args: the parsed options; ``unsuper_n_epochs`` is set to ``n_epochs`` when not given
    :return: ``args``
    """
    if args.unsuper_n_epochs is None:
        args.unsuper_n_epochs = args.n_epochs
    if args.repeats < 1 or args.total_timesteps < args.n_envs * args.n_steps:
        raise UsageError("need --repeats >= 1 and --total-timesteps of at least one rollout (n_envs x n_steps)")
    return args


def settings(argv: list[str]) -> argparse.Namespace:
    """
    The settings of a timed run from its command line, as another probe runs one.

    :param argv: flags of :data:`OPTIONS`
    :return: the checked settings
    """
    return check(parse(OPTIONS, argv))


@probe("overhead", "wall clock and CPU of PPO_REWARD against PPO in one process, phase by phase", *OPTIONS)
def compare(args: argparse.Namespace) -> None:
    """
    The two alternate, ``--repeats`` times; the table with its per-phase breakdown goes to ``--output``.

    :param args: the options
    """
    check(args)
    # The same thread pool for both algorithms, so the ratio compares algorithms, not pools.
    th.set_num_threads(args.threads)
    instrument_library()
    context = {
        "threads": args.threads,
        "date": datetime.date.today().isoformat(),
        "cpus": str(os.cpu_count()),
        "load_before": f"{os.getloadavg()[0]:.1f}",
    }
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        order = ["PPO", "PrefPPO"] if repeat % 2 == 0 else ["PrefPPO", "PPO"]
        run: dict[str, Any] = {"order": " then ".join("PPO_REWARD" if a == "PrefPPO" else a for a in order)}
        for algo in order:
            run[algo] = timed_run(algo, args)
            print(f"repeat {repeat + 1} {algo:8s} wall {run[algo]['wall']:7.1f} s  cpu {run[algo]['cpu']:7.1f} s", flush=True)
        print(f"repeat {repeat + 1} ratio {run['PrefPPO']['wall'] / run['PPO']['wall']:.3f}", flush=True)
        runs.append(run)
    context["load_after"] = f"{os.getloadavg()[0]:.1f}"
    report = markdown(args, runs, context)
    print(report)
    with open(args.output, "w") as file:
        file.write(report)
    print(f"written to {args.output}")
