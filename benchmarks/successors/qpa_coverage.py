"""
Why QPA's queries hurt swing-up (``README.md``, ``swingup_dev``): what the labelled segments hold, with QPA's queries
(each round's pairs from the last 10 episodes) and with the defaults' (disagreement among every stored segment).

    python -m benchmarks successors qpa-coverage [--seeds 0 1 2] [--workers 2]   # resumes where it stopped
    python -m benchmarks successors qpa-coverage-table

Two arms on cartpole_swingup at the protocol's high budget (400k steps, 1000 labels), its PPO settings: the defaults
(``plain_high``) and ``qpa_episodes=10`` (``qpa_high``), on the development seeds of ``swingup_dev``, where QPA lost.
After the run, the labelled pairs' true rewards (kept in the preference dataset) say which states the labels are
about: the share of labelled steps with a true reward above 0.5 (the pole near upright and the cart near the
centre), and how far apart the two segments of a pair are (the gap of their true returns, per step). The first
round (drawn from the pretraining's states) and the later rounds are counted apart. And the learned reward is read on
the states the policy is in at the end (pairs from its last 10 episodes): its agreement with their true returns, its
per-step correlation with the true reward. And the final reward's shape: its mean, as the policy gets it, by tenth
of the true per-step reward, over every labelled step (``qpa-shape-plot`` draws it).
Two more arms test the account causally (:func:`bend_reward`): the defaults' run with its reward bent as concave as
QPA's before the policy gets it (``plain_concave``), and QPA's run with the bend undone (``qpa_straightened``), each
with its own labels and queries. If the shape is the cause, the first loses what QPA loses and the second wins it back.
A third (``plain_convex``) bends the defaults' reward the second way.
Nothing is chosen here: it measures the mechanism of a result already reported.
"""

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.study import Option, probe, shared
from benchmarks.successors.surf_pseudo import RESULTS as SURF_RESULTS
from benchmarks.successors.surf_pseudo import train_recorded, write_json

RESULTS = SURF_RESULTS.parent / "qpa_coverage"
#: the shape's picture, beside README.md
HERE_PNG = Path(__file__).resolve().parent / "qpa_shape.png"
TASK = "cartpole_swingup"
#: the arms: the defaults, QPA's queries at its DMC setting, and each with its reward bent (:data:`CONCAVE_POWER`)
ARMS: dict[str, dict[str, Any]] = {
    "plain_high": {},
    "qpa_high": {"qpa_episodes": 10},
    "plain_concave": {},
    "qpa_straightened": {"qpa_episodes": 10},
    "plain_convex": {},
}
#: the causal test's arms: a run's reward bent before the policy gets it, its labels, queries and reward model the
#: arm's own. The defaults' made more concave, as QPA's is measured to be (the power set once, before any run: QPA's
#: mean share of the lift, 0.63, from the defaults', 0.54, would take 0.75, and 0.7 errs towards more concave);
#: QPA's with that bend undone (1 / 0.7); and, once the straightened QPA won back most of its loss where the concave
#: defaults lost nothing, the defaults' bent the same convex way: does a convex bend help any reward here?
CONCAVE_POWER = {"plain_concave": 0.7, "qpa_straightened": 1 / 0.7, "plain_convex": 1 / 0.7}
#: a labelled step counts as "up" above this true reward
UP = 0.5
#: the tenths of the true per-step reward's range [0, 1], by which the learned reward's shape is read
BINS = np.linspace(0.0, 1.0, 11)


def result_path(arm: str, seed: int) -> Path:
    return RESULTS / TASK / arm / f"seed{seed}.json"


def label_coverage(rewards_0: np.ndarray, rewards_1: np.ndarray) -> dict[str, float]:
    """
    :param rewards_0: ``(N, H)`` true rewards of the pairs' first segments
    :param rewards_1: ``(N, H)`` ... and of their second ones
    :return: the share of labelled steps above :data:`UP`, the share of pairs with such a step in either segment,
        and the mean gap of the two segments' true returns per step
    """
    both = np.concatenate([rewards_0, rewards_1], axis=1)
    gap = np.abs(rewards_0.sum(1) - rewards_1.sum(1)) / rewards_0.shape[1]
    return {
        "up_steps": float((both > UP).mean()),
        "pairs_with_up": float((both > UP).any(axis=1).mean()),
        "gap_per_step": float(gap.mean()),
    }


def policy_states(learner: Any, episodes: int = 10, n_pairs: int = 256, seed: int = 0) -> dict[str, float]:
    """
    How the learned reward reads the states the policy is in at the end of the run: pairs drawn from the last
    ``episodes`` episodes (the running ones and the newest finished), on a generator of their own, so the run's own
    streams are not touched (it ends first anyway).

    :return: the reward's agreement with the true returns on those pairs (ties left out), the per-step Pearson
        correlation of learned and true reward over their steps, and their mean true reward per step
    """
    from sb3_pref.core import pair_draws

    model = learner.reward_model
    agreement = pair_draws.oracle_agreement(learner.store, model, n_pairs, np.random.default_rng(seed), episodes)
    # the same pairs again (the same generator state) for the per-step figures
    seg_0, seg_1 = pair_draws.draw_pairs(learner.store, n_pairs, learner.size_segment, np.random.default_rng(seed), episodes)
    learned, _ = model.predict(np.concatenate([seg_0.features, seg_1.features]))
    true = np.concatenate([seg_0.rewards, seg_1.rewards])
    return {
        "agreement": agreement,
        "correlation": float(np.corrcoef(learned.reshape(-1), true.reshape(-1))[0, 1]),
        "true_reward_per_step": float(true.mean()),
    }


def binned(learned: np.ndarray, true: np.ndarray) -> dict[str, list[float]]:
    """:return: the mean learned reward of the steps in each tenth of the true reward (None where none), and the counts"""
    which = np.clip(np.digitize(true, BINS[1:-1]), 0, len(BINS) - 2)
    counts = np.bincount(which, minlength=len(BINS) - 1)
    sums = np.bincount(which, weights=learned, minlength=len(BINS) - 1)
    means = [float(total / count) if count else None for total, count in zip(sums, counts)]
    return {"mean": means, "count": counts.tolist()}  # type: ignore[dict-item]


def reward_shape(learner: Any, episodes: int = 10, n_pairs: int = 256, seed: int = 0) -> dict[str, Any]:
    """
    What the final reward pays, in the units the policy gets it (normalised by the learner's shift and scale, RUNE
    off), by tenth of the true per-step reward: over every labelled step (which span the range, the pole down to up)
    and over the steps of the policy's last ``episodes`` episodes (pairs drawn as :func:`policy_states` draws them).
    The gap between the two says how much more the learned reward pays for balancing than for what the policy does.

    :return: the binned means and counts of both, and the policy's states' mean learned reward
    """
    from sb3_pref.core import pair_draws

    dataset = learner.dataset
    features = np.concatenate([np.asarray(dataset.features_0), np.asarray(dataset.features_1)])
    true = np.concatenate([np.asarray(dataset.rewards_0), np.asarray(dataset.rewards_1)]).reshape(-1)
    width, obs_dim = features.shape[-1], learner.reward_model.obs_dim

    def as_the_policy_gets_it(rows: np.ndarray) -> np.ndarray:
        # the learner's own reading without a step count (the ensemble's mean, normalised; RUNE's bonus off), through
        # any wrapper the run put on it (the concave arm's): the rows are observation + action
        rows = rows.reshape(-1, width)
        return learner.predict_rewards_and_bonus(rows[:, :obs_dim], rows[:, obs_dim:])[0]

    learned = as_the_policy_gets_it(features)
    seg_0, seg_1 = pair_draws.draw_pairs(learner.store, n_pairs, learner.size_segment, np.random.default_rng(seed), episodes)
    policy_learned = as_the_policy_gets_it(np.concatenate([seg_0.features, seg_1.features]))
    policy_true = np.concatenate([seg_0.rewards, seg_1.rewards]).reshape(-1)
    return {
        "labelled": binned(learned, true),
        "policy": binned(policy_learned, policy_true),
        "policy_mean": float(policy_learned.mean()),
    }


def bend_reward(learner: Any, power: float, n_transitions: int = 10_000) -> None:
    """
    Bend the reward the policy gets, on this learner only: after each round that trains the reward model, the 1st and
    99th percentile of its reward over the last ``n_transitions`` transitions are the range ``[low, high]``; a reward
    inside it becomes ``low + (high - low) * u ** power`` with ``u = (r - low) / (high - low)``, one outside it is left
    as it is (continuous and increasing, so the reward orders every state as before; a power below 1 pays the middle
    more, one above 1 less).
    The reward model, its labels and the queries are untouched: the queries rank the ensemble's raw segment returns.

    :param learner: the run's preference learner
    :param power: below 1: concave; above 1: convex
    :param n_transitions: the range's sample (``_fit_normalisation``'s default size)
    """
    query_round, predict = learner.query_round, learner.predict_rewards_and_bonus
    span = [-np.inf, np.inf]  # no bend before the first round (pretraining uses the entropy reward anyway)

    def round_then_range(*args: Any, **kwargs: Any) -> dict[str, float]:
        stats = query_round(*args, **kwargs)
        if "model_train_epochs" in stats:  # the model changed: its range on the recent states, fixed until the next
            obs, actions, _ = learner.store.last_transitions(n_transitions)
            rewards, _ = predict(obs, actions)
            span[:] = np.percentile(rewards, [1, 99]).tolist()
        return stats

    def bent(obs: np.ndarray, actions: np.ndarray, num_timesteps: Any = None) -> tuple[np.ndarray, Any]:
        rewards, bonus = predict(obs, actions, num_timesteps)
        low, high = span
        inside = (rewards > low) & (rewards < high)
        if np.isfinite(low) and high > low and inside.any():
            rewards = rewards.copy()
            rewards[inside] = low + (high - low) * ((rewards[inside] - low) / (high - low)) ** power
        return rewards, bonus

    learner.query_round, learner.predict_rewards_and_bonus = round_then_range, bent


def run_one(task: str, arm: str, seed: int) -> str:
    """Train ``arm`` on swing-up and ``seed``; record its labels' coverage, first round and later; :return: the JSON"""
    wrap = (lambda learner: bend_reward(learner, CONCAVE_POWER[arm])) if arm in CONCAVE_POWER else None
    model, record = train_recorded(task, 0, ARMS[arm], seed, wrap)
    dataset = model.pref_learner.dataset
    first = int(record["rounds"][0]["labels"])
    rewards_0, rewards_1 = np.asarray(dataset.rewards_0), np.asarray(dataset.rewards_1)
    record["coverage_first_round"] = label_coverage(rewards_0[:first], rewards_1[:first])
    record["coverage_later_rounds"] = label_coverage(rewards_0[first:], rewards_1[first:])
    record["policy_states"] = policy_states(model.pref_learner)
    record["reward_shape"] = reward_shape(model.pref_learner)
    return write_json(result_path(arm, seed), {"arm": arm, **record})


def finished_runs() -> list[dict[str, Any]]:
    """:return: the committed runs' records, by seed (as a number), then arm"""
    import json

    paths = sorted((RESULTS / TASK).glob("*/seed*.json"), key=lambda p: (int(p.stem[4:]), p.parent.name))
    return [json.loads(path.read_text()) for path in paths]


def table() -> str:
    """:return: per seed and arm, the final return, the reward's agreement and the later rounds' coverage (Markdown)"""

    lines = [
        "| seed | arm | final return | agreement, last round | labelled steps up (first round / later) "
        "| pairs with a step up (first / later) | true-return gap per step (first / later) "
        "| the policy's last 10 episodes: agreement / correlation / true reward per step | CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in finished_runs():
        first, later = run["coverage_first_round"], run["coverage_later_rounds"]
        states = run.get("policy_states")
        recent = "-"
        if states:
            recent = f"{states['agreement']:.3f} / {states['correlation']:.2f} / {states['true_reward_per_step']:.3f}"
        lines.append(
            f"| {run['seed']} | {run['arm']} | {run['final']:.1f} | {run['rounds'][-1]['true_pref_accuracy']:.3f} "
            f"| {first['up_steps']:.3f} / {later['up_steps']:.3f} "
            f"| {first['pairs_with_up']:.3f} / {later['pairs_with_up']:.3f} "
            f"| {first['gap_per_step']:.3f} / {later['gap_per_step']:.3f} | {recent} | {run['cpu_seconds']:.0f} |"
        )
    return "\n".join(lines)


def shape_table() -> str:
    """:return: per seed and arm, the final reward's mean on the labelled steps by tenth of the true reward (Markdown)"""

    tenths = " | ".join(f"[{low:.1f}, {high:.1f})" for low, high in zip(BINS[:-1], BINS[1:]))
    lines = [
        f"| seed | arm | final return | {tenths} | the policy's steps: mean | above 0.8 - policy "
        "| [0.2, 0.3)'s share of the lift |",
        "|---|---|---|" + "---|" * (len(BINS) - 1) + "---|---|---|",
    ]
    for run in finished_runs():
        shape = run.get("reward_shape")
        if not shape:
            continue
        means = shape["labelled"]["mean"]
        cells = " | ".join("-" if m is None else f"{m:.2f}" for m in means)
        counts = shape["labelled"]["count"]
        # "top": every labelled step above 0.8 (the top tenth alone holds 3 steps in some runs)
        top = sum(m * c for m, c in zip(means[-2:], counts[-2:]) if m is not None) / max(sum(counts[-2:]), 1)
        bottom, middle = (float("nan") if m is None else m for m in (means[0], means[2]))
        # how much of the lift from the bottom tenth to the steps above 0.8 a poor swing already earns: a concave reward
        # pays the states in between more
        lines.append(
            f"| {run['seed']} | {run['arm']} | {run['final']:.1f} | {cells} | {shape['policy_mean']:.2f} "
            f"| {top - shape['policy_mean']:.2f} | {(middle - bottom) / (top - bottom):.2f} |"
        )
    return "\n".join(lines)


@probe(
    "qpa-coverage",
    "swing-up at 1000 labels with and without QPA's queries: which states the labelled pairs hold",
    shared("seeds", default=[0, 1, 2], help="seeds, one run per arm each (swingup_dev's development seeds)"),
    Option("--arms", "the arms", nargs="+", choices=list(ARMS), default=list(ARMS)),
    shared("workers"),
    environ={"MUJOCO_GL": "osmesa"},
)
def run_qpa_coverage(args: argparse.Namespace) -> None:
    """
    Each arm on each seed, ``--workers`` at a time; a run whose JSON exists is skipped.

    :param args: the options
    """
    from protocol import run_jobs  # benchmarks/quality, put on the path by surf_pseudo

    jobs = [(TASK, arm, seed) for seed in args.seeds for arm in args.arms]
    run_jobs(run_one, [job for job in jobs if not result_path(job[1], job[2]).exists()], args.workers)


@probe("qpa-coverage-table", "the qpa-coverage runs' table, from their committed JSON files")
def print_table(args: argparse.Namespace) -> None:
    """
    Per seed and arm: the return, the reward's agreement and which states the labels hold.

    :param args: the options (none)
    """
    print(table())
    print()
    print(shape_table())


@probe("qpa-shape-plot", "the qpa-coverage runs' final rewards by tenth of the true reward, a PNG beside README.md")
def plot_shape(args: argparse.Namespace) -> None:
    """
    One panel per seed: each arm's final reward (as the policy gets it) against the true per-step reward's tenths.

    :param args: the options (none)
    """

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [run for run in finished_runs() if "reward_shape" in run]
    seeds = sorted({run["seed"] for run in runs})
    columns = min(len(seeds), 5)
    rows = -(-len(seeds) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 3.0 * rows), sharey=True, squeeze=False)
    centres = (BINS[:-1] + BINS[1:]) / 2
    names = {
        "plain_high": "defaults",
        "qpa_high": "QPA's queries",
        "plain_concave": "defaults, bent concave",
        "qpa_straightened": "QPA, bend undone",
        "plain_convex": "defaults, bent convex",
    }
    for axis in axes.flat[len(seeds) :]:
        axis.set_visible(False)
    for axis, seed in zip(axes.flat, seeds):
        for run in (run for run in runs if run["seed"] == seed):
            means = np.array([np.nan if m is None else m for m in run["reward_shape"]["labelled"]["mean"]])
            colour = plt.get_cmap("tab10")(list(ARMS).index(run["arm"]))  # one colour per arm on every panel
            label = f"{names.get(run['arm'], run['arm'])}: {run['final']:.0f}"
            axis.plot(centres, means, marker="o", markersize=3, color=colour, label=label)
        axis.set_title(f"seed {seed}")
        axis.set_xlabel("true reward per step")
        axis.legend(title="final return", fontsize=7, title_fontsize=7, loc="lower right", framealpha=0.6)
    for row in axes:
        row[0].set_ylabel("learned reward, as the policy gets it")
    figure.suptitle("cartpole_swingup, 1000 labels: the final reward on the labelled steps", fontsize=10)
    figure.tight_layout()
    out = HERE_PNG
    figure.savefig(out, dpi=110)
    print(f"written to {out}")
