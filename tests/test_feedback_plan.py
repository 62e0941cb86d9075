"""The feedback plan (issue 41): the schedule a user who sets only the label budget gets, and B-Pref's, unchanged."""

import itertools
import warnings

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv

from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel
from sb3_pref.core.feedback_plan import FeedbackPlan, plan_feedback

SMALL_NET = {"net_arch": [32, 32]}


def pendulum(n_envs: int = 2, seed: int = 0):
    return make_vec_env("Pendulum-v1", n_envs=n_envs, seed=seed)


def small_model(env, size_segment: int = 10, **kwargs) -> RewardModel:
    return RewardModel(env.observation_space, env.action_space, size_segment=size_segment, hidden_dim=16, **kwargs)


class RoundLog(BaseCallback):
    """(env step, queries asked so far) as each rollout starts (the round that ends pretraining is asked then) and ends
    (where later rounds are asked); it runs after the library's recorder, so it sees each round's queries."""

    def __init__(self) -> None:
        super().__init__()
        self.feed: list[tuple[int, int]] = []

    def _on_rollout_start(self) -> None:
        self.feed.append((self.model.num_timesteps, self.model.pref_learner.total_feed))

    def _on_rollout_end(self) -> None:
        self.feed.append((self.model.num_timesteps, self.model.pref_learner.total_feed))

    def _on_step(self) -> bool:
        return True


def asked_rounds(feed: list[tuple[int, int]], before: int = 0) -> list[tuple[int, int]]:
    """(env step, queries) of each round, from the running totals (``before``: the total when the log started)."""
    rounds = []
    for step, total in feed:
        if total > before:
            rounds.append((step, total - before))
        before = total
    return rounds


def test_the_plan_at_the_demo_budget_is_the_demo_schedule_that_learned():
    # benchmarks/demo/README.md: 8k steps of pretraining, 200 labels, then 25 every 4k steps, at most 50 passes per round.
    plan = plan_feedback("auto", "on_policy", 120_000, 400, 2000, {})
    assert (plan.unsuper_step, plan.first_round, plan.round_size, plan.num_interaction, plan.re_update) == (
        8000, 200, 25, 4000, 50,
    )  # fmt: skip
    assert plan.rounds() == [(8000, 200)] + [(8000 + 4000 * k, 25) for k in range(1, 9)]
    assert plan.rounds()[-1][0] == 40_000 and sum(n for _, n in plan.rounds()) == 400


@pytest.mark.parametrize(
    "steps, labels, rollout",
    list(
        itertools.product(
            [20_000, 100_000, 120_000, 400_000, 1_000_000, 4_000_000], [50, 200, 400, 1000, 4000], [1, 256, 2000, 4096, 16_000]
        )
    ),
)
def test_a_planned_schedule_asks_the_whole_budget_early_in_the_run(steps, labels, rollout):
    plan = plan_feedback("auto", "on_policy", steps, labels, rollout, {})
    rounds = plan.rounds()
    assert sum(n for _, n in rounds) == labels, plan
    assert plan.unsuper_step <= max(10_000 + rollout, rollout) and plan.unsuper_step % rollout == 0
    # a quarter to a half of the labels first (at least one), and the last label by a third of the run (or as soon
    # as whole rollouts allow it)
    assert labels // 4 <= rounds[0][1] <= max(1, labels // 2) or rounds[0][1] == labels
    assert rounds[-1][0] <= max(steps / 3, plan.unsuper_step) + 9 * rollout, plan
    assert len(rounds) <= 9


def test_what_the_user_sets_is_kept_and_the_rest_planned_around_it():
    given = {"num_interaction": 10_000}
    plan = plan_feedback("auto", "on_policy", 120_000, 400, 2000, given)
    # 3 rounds fit between pretraining (8k) and a third of the run (40k): the 200 labels after the first split in 3
    assert (plan.num_interaction, plan.round_size, plan.first_round, plan.given) == (10_000, 67, 200, ("num_interaction",))
    # a round size the user gives is the first round's too (as RewardModel's initial_mb_size=None says)
    plan = plan_feedback("auto", "on_policy", 120_000, 400, 2000, {"round_size": 50})
    assert (plan.first_round, plan.round_size, plan.num_interaction) == (50, 50, 4000)
    assert sum(n for _, n in plan.rounds()) == 400
    plan = plan_feedback("auto", "on_policy", 120_000, 400, 2000, {"unsuper_step": 0, "re_update": 7})
    assert (plan.unsuper_step, plan.re_update, plan.num_interaction) == (0, 7, 4000)  # 40k / 8 rounds, no pretraining


def test_bpref_keeps_its_fixed_values_whatever_the_budget():
    for steps in (10_000, 4_000_000):
        plan = plan_feedback("bpref", "on_policy", steps, 1000, 16_000, {})
        assert (plan.unsuper_step, plan.num_interaction, plan.first_round, plan.round_size, plan.re_update) == (
            32_000, 16_000, 128, 128, 100,
        )  # fmt: skip
    plan = plan_feedback("bpref", "off_policy", 1_000_000, 1000, 1, {"round_size": 100})
    assert (plan.unsuper_step, plan.num_interaction, plan.first_round, plan.round_size, plan.re_update) == (
        9000, 5000, 100, 100, 200,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"feedback_schedule.*'auto'.*'bpref'"):
        PPO_REWARD("MlpPolicy", pendulum(), reward_model=small_model(pendulum()), feedback_schedule="fast")


def test_ppo_reward_asks_exactly_the_rounds_its_plan_says_and_logs_it(capsys):
    env = pendulum()
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, reward_model=small_model(env), teacher="oracle",
        max_feed=40, policy_kwargs=SMALL_NET, seed=0, verbose=1,
    )  # fmt: skip
    assert model.feedback_plan is None and model.num_interaction is None  # nothing is planned before learn
    log = RoundLog()
    model.learn(128 * 30, callback=log)
    plan = model.feedback_plan
    # 3840 steps: 256 steps of pretraining (3840 / 15), 20 labels, then 8 rounds of 3 every 2 rollouts until 1280
    assert (plan.unsuper_step, plan.first_round, plan.round_size, plan.num_interaction, plan.re_update) == (
        256, 20, 3, 128, 50,
    )  # fmt: skip
    assert asked_rounds(log.feed) == plan.rounds()
    assert model.pref_learner.total_feed == 40 and model.pref_learner.re_update == 50
    assert "feedback plan (auto): 256 steps of pretraining, 20 queries at step 256" in capsys.readouterr().out
    # what the user left unset stays unset: a later learn plans again (or continues) from it
    assert (model.num_interaction, model.unsuper_step, model.re_update, model.reward_model.mb_size) == (None,) * 4


def test_a_resumed_run_asks_what_the_uninterrupted_run_asks(tmp_path):
    def make():
        env = pendulum()
        return PPO_REWARD(
            "MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, reward_model=small_model(env), teacher="oracle",
            max_feed=40, policy_kwargs=SMALL_NET, seed=0,
        )  # fmt: skip

    whole, log = make(), RoundLog()
    # a checkpoint at the end of the fifth rollout (640 steps), saved during the uninterrupted run
    whole.learn(128 * 30, callback=[log, SaveAt(640, tmp_path / "model")])
    resumed, resumed_log = PPO_REWARD.load(tmp_path / "model", env=pendulum()), RoundLog()
    assert resumed.num_timesteps == 640 and resumed.feedback_plan == whole.feedback_plan
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a continued plan has nothing to warn about
        resumed.learn(128 * 30 - 640, reset_num_timesteps=False, callback=resumed_log)
    after = [(step, n) for step, n in asked_rounds(log.feed) if step > 640]
    planned = [(step, n) for step, n in whole.feedback_plan.rounds() if step > 640]
    assert asked_rounds(resumed_log.feed, before=29) == after == planned
    assert len(after) == 4 and resumed.pref_learner.total_feed == 40


class SaveAt(BaseCallback):
    """Saves the model at the end of the rollout that reaches ``steps``."""

    def __init__(self, steps: int, path) -> None:
        super().__init__()
        self.steps, self.path = steps, path

    def _on_rollout_end(self) -> None:
        if self.num_timesteps == self.steps:
            self.model.save(self.path)

    def _on_step(self) -> bool:
        return True


def test_a_budget_too_small_for_the_labels_is_told_with_its_numbers():
    env = pendulum()
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=64, reward_model=small_model(env, mb_size=10), teacher="oracle", max_feed=100,
        num_interaction=512, unsuper_step=128, policy_kwargs=SMALL_NET, seed=0,
    )  # fmt: skip
    with pytest.warns(UserWarning, match=r"only 20 of the 100 labels left \(max_feed=100\).*1024 steps.*num_interaction"):
        model.learn(1024)
    assert model.pref_learner.total_feed == 20


def test_a_call_that_ends_with_its_pretraining_is_told_it_asks_no_label():
    """The first round comes when the rollout after pretraining starts, so a call no longer than its pretraining asks
    nothing: the plan must say so, not count that round, and the next (continued) call asks it at once."""
    env = pendulum()
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=64, reward_model=small_model(env), teacher="oracle", max_feed=20,
        policy_kwargs=SMALL_NET, seed=0,
    )  # fmt: skip
    with pytest.warns(UserWarning, match=r"only 0 of the 20 labels left \(max_feed=20\).*100 steps.*no query round"):
        model.learn(100)  # one rollout of 128 steps, all of it pretraining
    assert model.num_timesteps == 128 and model.pref_learner.total_feed == 0
    log = RoundLog()
    model.learn(128, reset_num_timesteps=False, callback=log)
    assert model.pref_learner.total_feed == 20 and asked_rounds(log.feed) == [(128, 20)]


def test_the_bpref_call_shape_and_flags_keep_bprefs_schedule():
    from sb3_pref.experiments.bpref import make_env, make_prefppo
    from sb3_pref.experiments.flags import build_parser, parse_args

    env = pendulum()
    model = PPO_REWARD(small_model(env, mb_size=16), "MlpPolicy", env, n_steps=64, max_feed=64, teacher="oracle",
                       unsuper_step=128, num_interaction=256, policy_kwargs=SMALL_NET, seed=0)  # fmt: skip
    assert model.feedback_schedule == "bpref"
    log = RoundLog()
    model.learn(128 * 8, callback=log)
    # B-Pref: the first round (mb_size) where pretraining ends, then mb_size every num_interaction steps
    assert asked_rounds(log.feed) == [(128, 16), (384, 16), (640, 16), (896, 16)]
    assert model.pref_learner.re_update == 100  # B-Pref's
    sac = SAC_REWARD(small_model(env, mb_size=16), "MlpPolicy", env, learning_starts=10, max_feed=64, seed=0)
    sac.learn(1)
    assert (sac.feedback_plan.unsuper_step, sac.feedback_plan.num_interaction, sac.pref_learner.re_update) == (
        9000, 5000, 200,
    )  # fmt: skip

    # B-Pref's script, with B-Pref's flags: the same rounds as before the plan existed
    args = parse_args(
        build_parser("B-Pref"),
        ["--env", "Pendulum-v1", "--n-envs", "2", "--n-steps", "64", "--batch-size", "64", "--unsuper-step", "128",
         "--re-num-interaction", "256", "--re-batch", "8", "--re-max-feed", "32", "--re-segment", "10"],
    )  # fmt: skip
    pref = make_prefppo(args, make_env(args, None), verbose=0)
    assert pref.feedback_schedule == "bpref"
    log = RoundLog()
    pref.learn(128 * 8, callback=log)
    assert asked_rounds(log.feed) == [(128, 8), (384, 8), (640, 8), (896, 8)]


def test_sac_reward_plans_from_its_budget_too():
    env = pendulum(n_envs=1)
    model = SAC_REWARD(
        "MlpPolicy", env, reward_model=small_model(env), teacher="oracle", max_feed=40, learning_starts=50,
        policy_kwargs=dict(SMALL_NET), seed=0, batch_size=32,
    )  # fmt: skip
    model.learn(600)
    plan = model.feedback_plan
    # 600 steps: 40 of pretraining after the 50 seed steps, 20 labels, then 8 rounds of 3 every 20 steps
    assert (plan.unsuper_step, plan.first_round, plan.round_size, plan.num_interaction) == (40, 20, 3, 20)
    assert model.pref_learner.total_feed == 40
    saved = FeedbackPlan.from_dict(plan.to_dict())
    assert saved == plan


@pytest.mark.parametrize("unsuper_flag", [1, 0])
def test_sac_reward_asks_where_its_plan_says_after_the_seed_steps(unsuper_flag, capsys):
    # learning_starts' random steps come before pretraining and the rounds: the plan the user is shown must say so
    # (it once said "10 queries at step 40" where the run asked at step 240)
    env = pendulum(n_envs=1)
    model = SAC_REWARD(
        "MlpPolicy", env, reward_model=small_model(env, mb_size=10), teacher="oracle", max_feed=20, learning_starts=200,
        policy_kwargs=dict(SMALL_NET), seed=0, batch_size=32, verbose=1,  # a copy: SB3's SAC writes use_sde into it
    )  # fmt: skip
    log = RoundLog()
    model.learn(600, callback=log, unsuper_flag=unsuper_flag)
    rounds = model.feedback_plan.rounds()
    assert asked_rounds(log.feed) == rounds and model.pref_learner.total_feed == 20
    first = 240 if unsuper_flag else 201  # after 200 seed steps: 40 of pretraining, or the first preference step
    assert rounds[0] == (first, 10) and rounds[1] == (first + model.feedback_plan.num_interaction, 10)
    assert (
        f"200 seed steps (learning_starts), {'40 steps of pretraining, ' if unsuper_flag else ''}10 queries at step "
        f"{first}" in capsys.readouterr().out
    )


@pytest.mark.parametrize("episodes", [1, 2])
def test_sac_reward_with_a_train_freq_in_episodes_plans_whole_episodes_and_asks_every_label(episodes):
    # SB3's train_freq=(n, "episode") ends a rollout every n episodes (200 steps each on Pendulum-v1). The plan once
    # counted in single steps, with rounds every 33 steps, and one round ran per 200-step rollout: 18 of 20 labels
    # were asked with train_freq=(1, "episode"), 14 with (2, "episode"), and nobody was told.
    env = pendulum(n_envs=1)
    model = SAC_REWARD(
        "MlpPolicy", env, reward_model=small_model(env), teacher="oracle", max_feed=20, learning_starts=100,
        train_freq=(episodes, "episode"), gradient_steps=1, policy_kwargs=dict(SMALL_NET), seed=0, batch_size=32,
    )  # fmt: skip
    log = RoundLog()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the plan fits: no warning about labels left or long rollouts
        model.learn(1000, callback=log)
    plan = model.feedback_plan
    assert plan.rollout_steps == 200 * episodes and plan.num_interaction % plan.rollout_steps == 0
    assert asked_rounds(log.feed) == plan.rounds() and model.pref_learner.total_feed == 20


class EndsAfter50(gym.Env):
    """Episodes of 50 steps that end by termination, with no time limit the library could read."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        self.t += 1
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), -float(action[0] ** 2), self.t >= 50, False, {}


def test_rollouts_longer_than_the_plan_counted_on_are_told_once():
    # Without a time limit, an episode's length is unknown when learn() plans: the plan counts in single steps, and
    # the first 50-step rollout of the preference phase says that its rounds will come later than planned. In a
    # SubprocVecEnv: looking for a TimeLimit that is not there must not kill the env's worker process.
    env = make_vec_env(EndsAfter50, n_envs=1, seed=0, vec_env_cls=SubprocVecEnv)
    model = SAC_REWARD(
        "MlpPolicy", env, reward_model=small_model(env), teacher="oracle", max_feed=20, learning_starts=50,
        train_freq=(1, "episode"), gradient_steps=1, policy_kwargs=dict(SMALL_NET), seed=0, batch_size=32,
    )  # fmt: skip
    told_what = r"a rollout of 50 env steps is longer than the 1 the feedback plan counted on.*time limit"
    with pytest.warns(UserWarning, match=told_what) as told:
        model.learn(600)
    assert sum("longer than the" in str(w.message) for w in told) == 1
    assert model.feedback_plan.rollout_steps == 1 and model.pref_learner.total_feed == 20
    env.close()


def test_the_plan_survives_a_file_made_before_it(tmp_path):
    # A model saved by the last release (tests/data, B-Pref's defaults stored as values) continues with them.
    loaded = PPO_REWARD.load("tests/data/ppo_reward_release.zip", env=pendulum(n_envs=1))
    assert loaded.feedback_plan is None and loaded.num_interaction is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        loaded.learn(64, reset_num_timesteps=False)
    assert loaded.feedback_plan.num_interaction == loaded.num_interaction
    assert np.isfinite(loaded.pref_learner.total_feed)


@pytest.mark.parametrize("steps", [-5, float("nan"), "1000"])
def test_a_step_budget_that_is_not_one_is_refused_before_anything_runs(steps):
    env = pendulum()
    model = PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), teacher="oracle", max_feed=20, n_steps=64)
    with pytest.raises(ValueError, match=r"total_timesteps must be a number of env steps >= 0, got"):
        model.learn(steps)
    assert model.num_timesteps == 0 and model.feedback_plan is None


def test_a_continued_call_after_the_budget_is_spent_says_so(capsys):
    env = pendulum()
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=small_model(env), teacher="oracle", max_feed=20, n_steps=64, verbose=1
    )  # fmt: skip
    model.learn(1024)
    assert model.pref_learner.total_feed == 20
    model.learn(256, reset_num_timesteps=False)
    assert "Continuing the feedback plan (auto): no label left to ask (the budget is spent)" in capsys.readouterr().out


def test_a_budget_of_no_labels_is_refused_with_what_it_would_mean():
    env = pendulum()
    with pytest.raises(ValueError, match=r"max_feed=0 asks the teacher nothing.*never be trained.*max_feed=400"):
        PPO_REWARD("MlpPolicy", env, reward_model=small_model(env), teacher="oracle", max_feed=0)


def test_episodes_shorter_than_a_segment_are_told_at_the_first_round_at_the_users_line():
    # CartPole-v1's first episodes last about 20 steps: no 50-step segment can be cut, so nothing is asked. The user
    # hears it at the first round that finds none (it once took ten rounds), pointing at their learn() line.
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=64, batch_size=64, n_epochs=1, reward_model=small_model(env, size_segment=50),
        teacher="oracle", max_feed=20, policy_kwargs=SMALL_NET, seed=0,
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn(128 * 3)
    told = [w for w in caught if "found no episode piece of size_segment=50" in str(w.message)]
    assert len(told) == 1 and told[0].filename == __file__
    assert "fixed-horizon" in str(told[0].message) and model.pref_learner.total_feed == 0
