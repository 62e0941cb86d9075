"""
Teach an agent a behaviour it has no reward for, by clicking. A local web page shows two clips of
the agent side by side; you pick the one closer to what you want; PPO_REWARD learns a reward model
from your answers and the policy from the reward model.

    python examples/human_feedback.py                    # Pendulum: teach it to spin counter-clockwise
    python examples/human_feedback.py --mode async       # training keeps running while you answer
    python examples/human_feedback.py --resume runs/human_feedback/checkpoints/model_24576.zip
    python examples/human_feedback.py --env dmc:cheetah_run --total-timesteps 1000000 \\
        --instruction "Prefer the cheetah turning over backwards (a backflip)."
    python examples/human_feedback.py --goal upright --mixed 0.1   # a scripted teacher answers 90%, you 10%
    python examples/human_feedback.py --simulated-person # nobody at the keyboard: a script clicks (smoke test)

Open the URL it prints (the page stays on this machine; from elsewhere use an SSH tunnel:
``ssh -L PORT:127.0.0.1:PORT this-host``). Every answer is saved at once in RUN_DIR/labels.sqlite;
after a crash, restart with --resume and a checkpoint: the answers the checkpoint lacks join it.
"""

import argparse
import os
import shlex
import sys
import threading
import time
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref import PPO_REWARD, RewardModel, ScriptedTeacher
from sb3_pref.common.callbacks import AtomicCheckpointCallback, list_checkpoints
from sb3_pref.human import HumanFeedbackCallback, HumanTeacher, MixedTeacher, RenderStateWrapper, SegmentRenderer
from sb3_pref.human.progress import serve_command

PENDULUM_GOALS = {
    "spin": "Prefer the clip where the pendulum turns counter-clockwise (towards the left at the top) the most: "
    "full turns are best, any turning to the right is worst.",
    "upright": "Prefer the clip where the pendulum is closer to standing straight up, and still.",
}
#: The criterion for the pairs that look alike (both only swinging, both hanging): a third of the pairs a person met.
PENDULUM_WHEN_ALIKE = {
    "spin": "if neither makes a full turn, prefer the one whose swing reaches higher on the left (counter-clockwise) "
    "side; if you still cannot tell, answer \u201cCan't tell\u201d.",
    "upright": "prefer the one that ends closer to the top; if both hang, answer \u201cCan't tell\u201d.",
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1", help="a gymnasium id, or dmc:domain_task for dm_control")
    parser.add_argument("--goal", default="spin", choices=sorted(PENDULUM_GOALS), help="Pendulum: what to teach")
    parser.add_argument("--instruction", default=None, help="what the person should prefer (shown on the page)")
    parser.add_argument("--when-alike", default=None, help="what to answer when both clips look alike (shown under it)")
    parser.add_argument("--mode", default="blocking", choices=["blocking", "async"])
    parser.add_argument("--timeout", type=float, default=900, help="blocking mode: seconds per round before going on")
    parser.add_argument("--total-timesteps", type=int, default=60_000)
    parser.add_argument("--max-feed", type=int, default=60, help="total number of clip pairs you are asked about")
    parser.add_argument("--queries-per-round", type=int, default=10)
    parser.add_argument("--steps-between-rounds", type=int, default=8192)
    parser.add_argument(
        "--mixed", type=float, default=None, help="share of pairs shown to you; a scripted teacher answers the rest"
    )
    parser.add_argument("--run-dir", default="runs/human_feedback")
    parser.add_argument("--resume", default=None, help="a checkpoint .zip of this run to continue from")
    parser.add_argument("--port", type=int, default=0, help="port of the page (0: any free port)")
    parser.add_argument("--simulated-person", action="store_true", help="answer by script (checks the set-up)")
    parser.add_argument(
        "--keep-page",
        type=float,
        default=600,
        help="without a terminal (nohup): seconds the page keeps showing the result before the script exits",
    )
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_envs(args: argparse.Namespace) -> tuple[VecEnv, Callable[[], gym.Env]]:
    """Training envs recording render states, and a factory of the env that renders the clips."""
    if args.env.startswith("dmc:"):
        from sb3_pref.envs import make_dmcontrol_env, make_vec_dmcontrol_env

        name = args.env[len("dmc:") :]
        env = make_vec_dmcontrol_env(name, n_envs=4, seed=args.seed, wrapper_class=RenderStateWrapper)
        return env, lambda: make_dmcontrol_env(name, render_mode="rgb_array")
    env = make_vec_env(args.env, n_envs=4, seed=args.seed, wrapper_class=RenderStateWrapper)
    return env, lambda: gym.make(args.env, render_mode="rgb_array")


def turn_per_step(info: dict[str, Any]) -> float:
    """Pendulum's turn during one step, in turns (+ = counter-clockwise on screen): summed per episode on the page."""
    return float(info["render_state"][1]) * PENDULUM_DT / (2 * np.pi)


PENDULUM_DT = 0.05  # Pendulum-v1's time step (env.unwrapped.dt)


def newest_checkpoint(run_dir: str) -> Optional[str]:
    """:return: the checkpoint of this run with the most steps, or None before the first one"""
    checkpoints = list_checkpoints(os.path.join(run_dir, "checkpoints"), "model")  # newest first
    return checkpoints[0].model if checkpoints else None


def resume_command(run_dir: str) -> str:
    """The command line of this run with ``--resume`` set to its newest checkpoint: what the page shows if training stops."""
    checkpoint = newest_checkpoint(run_dir)
    if checkpoint is None:
        return ""  # the page says it in words: no checkpoint to resume from yet
    given, kept, index = sys.argv[1:], [], 0
    while index < len(given):  # the same options, without the --resume of this run (if it was resumed)
        if given[index] == "--resume":
            index += 2
            continue
        if not given[index].startswith("--resume="):
            kept.append(given[index])
        index += 1
    return shlex.join(["python", sys.argv[0], *kept, "--resume", checkpoint])


def spin_speed(segments) -> np.ndarray:
    """Mean angular velocity of Pendulum segments (positive = counter-clockwise on screen), from their render states."""
    return segments.extras["render_state"][..., 1].mean(axis=1)


def simulated_person(teacher: HumanTeacher, args: argparse.Namespace, stop: threading.Event) -> None:
    """Answers through the page's HTTP API, as the browser does, judging what the instruction asks."""
    import json
    import urllib.request

    base, token = teacher.url.split("?")[0], teacher.server.token
    headers = {"Content-Type": "application/json", "X-Feedback-Token": token}
    while not stop.is_set():
        with urllib.request.urlopen(f"{base}api/next?token={token}", timeout=10) as response:
            query = json.load(response)["query"]
        if query is None:
            time.sleep(0.2)
            continue
        seg_0, seg_1 = teacher.store.load_pairs([query["id"]])
        if args.env == "Pendulum-v1" and args.goal == "spin":
            score_0, score_1 = spin_speed(seg_0)[0], spin_speed(seg_1)[0]
        else:
            score_0, score_1 = seg_0.rewards.sum(), seg_1.rewards.sum()
        body = json.dumps({"query_id": query["id"], "choice": "right" if score_1 > score_0 else "left"}).encode()
        urllib.request.urlopen(urllib.request.Request(f"{base}api/answer", data=body, headers=headers), timeout=10).close()


def behaviour(
    model: PPO_REWARD, make_render_env: Callable[[], gym.Env], args: argparse.Namespace, video: str = ""
) -> tuple[str, str]:
    """
    One deterministic episode: what was taught first (Pendulum's net turns when the goal is to spin), then the task's
    own return, and optionally a clip of it (its path).
    """
    env = RenderStateWrapper(make_render_env())
    obs, _ = env.reset(seed=args.seed + 1000)
    states, total, done = [], 0.0, False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
        states.append(info["render_state"])
        total += float(reward)
        done = terminated or truncated
    env.close()
    summary = f"true return {total:8.1f}"
    if args.env == "Pendulum-v1":
        turns = np.sum(np.asarray(states)[:, 1]) * env.unwrapped.dt / (2 * np.pi)
        if args.goal == "spin" and args.instruction is None:
            # the person taught the turning, not the task's reward: lead with it
            summary = f"{turns:+5.1f} turns (+ = counter-clockwise, what was taught); task reward {total:.1f} (not taught)"
        else:
            summary += f", {turns:+5.1f} turns (+ = counter-clockwise)"
    clip = ""
    if video:
        renderer = SegmentRenderer(make_render_env)
        clip = renderer.write(np.asarray(states), video)
        renderer.close()
    return summary, clip


def timing_report(teacher: HumanTeacher) -> str:
    """
    Medians over the run's queries: clips ready after the query; playing on the page after the page put
    them on screen (the wait for the clip only, not the time the person spent on earlier pairs); the
    person's time per answer.
    """
    rows = [teacher.store.query_info(query_id) for query_id in range(1, teacher.store.counts()["queries"] + 1)]
    rows = [row for row in rows if row is not None]
    if not rows:
        return "no query was asked"
    per_frame = 1000 * teacher.renderer.render_seconds / max(1, teacher.renderer.frames_rendered)
    ready = np.median([row["created"] - row["asked"] for row in rows])
    text = f"clips ready {ready:.2f} s after the query ({per_frame:.0f} ms per rendered frame)"
    loaded = [row["load_seconds"] for row in rows if row["load_seconds"] is not None]
    if loaded:
        text += f", playing {np.median(loaded):.2f} s after the page showed them"
    shown = [row for row in rows if row["shown"] is not None]
    if shown:
        answered = [row["answered"] - row["shown"] for row in shown if row["answered"] is not None]
        if answered:
            text += f"; you took {np.median(answered):.1f} s per answer"
    return text + " (medians)"


def main() -> None:
    args = parse_args()
    th.set_num_threads(2)
    env, make_render_env = make_envs(args)
    instruction = args.instruction or (PENDULUM_GOALS[args.goal] if args.env == "Pendulum-v1" else "")
    pendulum_goal = args.env == "Pendulum-v1" and args.instruction is None
    when_alike = args.when_alike or (PENDULUM_WHEN_ALIKE[args.goal] if pendulum_goal else "")
    human = HumanTeacher(
        make_render_env,
        run_dir=args.run_dir,
        mode=args.mode,
        timeout=args.timeout,
        instruction=instruction,
        when_alike=when_alike,
        port=args.port,
        resume_command=lambda: resume_command(args.run_dir),
        correction_window=0 if args.simulated_person else 5,  # a script does not change its answers
    )
    teacher = (
        human if args.mixed is None else MixedTeacher(ScriptedTeacher.preset("oracle"), human, args.mixed, seed=args.seed)
    )
    # The page plots what the person teaches: the learned reward's return, and on Pendulum the turns per
    # episode; the env's own reward only where it is the goal (upright, or another env's task as it is).
    spinning = args.env == "Pendulum-v1" and args.goal == "spin"
    feedback = HumanFeedbackCallback(
        teacher,
        behaviour=turn_per_step if args.env == "Pendulum-v1" else None,
        behaviour_label="Turns per episode (+ = counter-clockwise)",
        task_reward_is_goal=args.instruction is None and not spinning,
    )
    if args.resume:
        model = PPO_REWARD.load(args.resume, env=env, teacher=teacher)
        print(f"resumed from {args.resume} at step {model.num_timesteps} with {len(model.pref_learner.dataset)} labels")
    else:
        reward_model = RewardModel(
            env.observation_space,
            env.action_space,
            size_segment=50,
            mb_size=args.queries_per_round,
            hidden_dim=64,
            seed=args.seed,
        )
        model = PPO_REWARD(
            "MlpPolicy",
            env,
            reward_model=reward_model,
            teacher=teacher,
            n_steps=1024,
            batch_size=256,
            n_epochs=10,
            learning_rate=1e-3,
            gamma=0.95,
            gae_lambda=0.95,
            use_sde=True,
            sde_sample_freq=4,
            num_interaction=args.steps_between_rounds,
            max_feed=args.max_feed,
            feed_type="disagreement",
            unsuper_step=4096,
            unsuper_n_epochs=10,
            re_update=50,
            normalize_reward=True,
            policy_kwargs={"net_arch": [64, 64]},
            seed=args.seed,
        )
    before, _ = behaviour(model, make_render_env, args)
    # A resumed run starts from a checkpoint's policy: "before" is the run's real start, kept in the run folder.
    if args.resume:
        before = human.store.get_meta("before_training", before)
    else:
        human.store.set_meta("before_training", before)
    stop = threading.Event()
    if args.simulated_person:
        threading.Thread(target=simulated_person, args=(human, args, stop), daemon=True).start()
    # One checkpoint every 8192 env steps, between rollouts and written aside, so a crash never leaves a torn one
    # and no answer handed over in a rollout is missing from the checkpoint after it (docs/howto-save-resume.md).
    checkpoints = AtomicCheckpointCallback(8192, os.path.join(args.run_dir, "checkpoints"), name_prefix="model")
    start = time.time()
    try:
        remaining = max(0, args.total_timesteps - model.num_timesteps)
        model.learn(remaining, callback=[feedback, checkpoints], reset_num_timesteps=not args.resume)
    except KeyboardInterrupt:
        path = os.path.join(args.run_dir, "interrupted")
        model.save(path)
        print(f"\ninterrupted: saved {path}.zip; continue with --resume {path}.zip (every answer is kept)")
        human.close()
        return
    stop.set()
    model.save(os.path.join(args.run_dir, "model"))
    n_exported = human.export_dataset(os.path.join(args.run_dir, "labels.npz"))
    after, clip = behaviour(model, make_render_env, args, video=os.path.join(args.run_dir, "final_policy"))
    human.show_result(f"Before training: {before}. After: {after}.", video=clip)

    counters = model.pref_learner.counters()
    print(f"\n== taught by clicking: {args.env}, {model.num_timesteps} steps in {(time.time() - start) / 60:.1f} min ==")
    print(f"before: {before}")
    print(f"after:  {after}, clip: {clip}")
    print(
        f"labels: {counters['labeled_feedback']:.0f} learned from ({counters['total_feed']:.0f} pairs asked, "
        f"{counters['skipped']:.0f} skipped), {n_exported} exported to {args.run_dir}/labels.npz"
    )
    if args.mixed is not None:
        agreement = teacher.agreement()
        print(f"you and the scripted teacher agreed on {agreement['rate']:.0%} of {agreement['n']:.0f} pairs")
    people = human.store.people_agreement()
    if people["n"] > 0:
        print(f"{people['people']:.0f} people agreed on {people['rate']:.0%} of {people['n']:.0f} pairs judged twice")
    print(timing_report(human))
    if not args.simulated_person:
        keep_page_open(human, args.keep_page)
    human.close()


def keep_page_open(human: HumanTeacher, seconds: float) -> None:
    """The page shows the result and the final policy's clip until the person is done looking."""
    try:
        if sys.stdin is not None and sys.stdin.isatty():
            input(f"the result is on the page ({human.url}); press Enter to close it ")
            return
        # No terminal to press Enter in (nohup, a service): keep the page up for a while instead of closing it at once.
        print(
            f"the result is on the page ({human.url}) for {seconds / 60:.0f} min (stop earlier with Ctrl-C or kill); "
            f"later: {serve_command(human.run_dir)}",
            flush=True,
        )
        time.sleep(max(0.0, seconds))
    except (EOFError, KeyboardInterrupt):
        pass


if __name__ == "__main__":
    main()
