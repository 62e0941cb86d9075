"""
The default feedback plan at three budgets, and B-Pref's fixed schedule at the demo's, drawn from the library's own
planner (``sb3_pref.core.feedback_plan``): what ``learn(total_timesteps)`` will do, without training anything.

    python docs/images/feedback_plan.py    # writes docs/images/feedback_plan.png (a few seconds)
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from sb3_pref.core.feedback_plan import SCHEDULE_SETTINGS, FeedbackPlan, plan_feedback

#: (title, schedule, algorithm family, total_timesteps, max_feed, env steps per rollout, SAC's learning_starts)
CASES = (
    ("README demo: PPO_REWARD, cartpole_balance, 8 envs x 250 steps", "auto", "on_policy", 120_000, 400, 2_000, 0),
    ("the same budget with feedback_schedule='bpref' (B-Pref's values)", "bpref", "on_policy", 120_000, 400, 2_000, 0),
    ("README snippet: PPO_REWARD, walker_walk, 8 envs x 500 steps", "auto", "on_policy", 1_000_000, 1_000, 4_000, 0),
    ("SAC_REWARD, Pendulum-v1, SB3's SAC defaults", "auto", "off_policy", 20_000, 200, 1, 100),
)


def plan_of(schedule: str, family: str, steps: int, labels: int, rollout: int, seed_steps: int) -> FeedbackPlan:
    """:return: the plan a first ``learn(steps)`` call makes when the user sets no schedule option"""
    unset = dict.fromkeys(SCHEDULE_SETTINGS)
    return plan_feedback(schedule, family, steps, labels, rollout, unset, pretraining=True, seed_steps=seed_steps)


def draw(path: str) -> None:
    """:param path: where the PNG goes"""
    fig, axes = plt.subplots(len(CASES), 1, figsize=(9, 2.1 * len(CASES)), constrained_layout=True)
    for ax, (title, schedule, family, steps, labels, rollout, seed_steps) in zip(axes, CASES):
        plan = plan_of(schedule, family, steps, labels, rollout, seed_steps)
        rounds = plan.rounds()
        scale = 1_000.0
        if seed_steps:
            ax.axvspan(0, seed_steps / scale, color="0.85", label="random seed steps (learning_starts)")
        ax.axvspan(seed_steps / scale, (seed_steps + plan.unsuper_step) / scale, color="#f2c27b", alpha=0.7,
                   label=f"state-entropy pretraining ({plan.unsuper_step:,} steps)")  # fmt: skip
        # labels asked so far, a step at each round
        xs, ys, total = [0.0], [0], 0
        for step, asked in rounds:
            xs += [step / scale, step / scale]
            ys += [total, total + asked]
            total += asked
        xs.append(steps / scale)
        ys.append(total)
        ax.plot(xs, ys, color="#1f5fa8", lw=2, label="labels asked so far")
        for step, asked in rounds[:1]:
            ax.annotate(f"first round: {asked}", (step / scale, asked), xytext=(6, -4), textcoords="offset points",
                        fontsize=8, va="top")  # fmt: skip
        if len(rounds) > 1:
            last_step = rounds[-1][0]
            ax.annotate(f"then {plan.round_size} every {plan.num_interaction:,} steps until {last_step:,}",
                        (last_step / scale, total), xytext=(6, -10), textcoords="offset points", fontsize=8,
                        va="top")  # fmt: skip
        ax.set_xlim(0, steps / scale)
        ax.set_ylim(0, labels * 1.12)
        ax.set_ylabel("labels")
        ax.set_title(f"{title}: learn({steps:,}), max_feed={labels}", fontsize=9, loc="left")
        ax.legend(loc="lower right", fontsize=7, frameon=False)
    axes[-1].set_xlabel("env steps (thousands)")
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    draw(os.path.join(os.path.dirname(os.path.abspath(__file__)), "feedback_plan.png"))
