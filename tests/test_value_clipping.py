"""PPO_REWARD's value_loss option: SB3's update untouched by default, the RLHF document's clipped maximum on request."""

import numpy as np
import pytest
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.common.rlhf import RLHF_PRESET

NET = {"net_arch": [16]}
N_STEPS = 64


def preference_model(**kwargs) -> PPO_REWARD:
    """PPO_REWARD on Pendulum's learned reward: one env, the whole rollout in one minibatch, one epoch."""
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=8, mb_size=16, hidden_dim=16, seed=0)
    settings = dict(
        reward_model=reward_model,
        teacher="oracle",
        n_steps=N_STEPS,
        batch_size=N_STEPS,
        n_epochs=1,
        num_interaction=N_STEPS,
        max_feed=32,
        re_update=2,
        unsuper_flag=0,
        policy_kwargs=NET,
        seed=0,
    )
    settings.update(kwargs)
    return PPO_REWARD("MlpPolicy", env, **settings)


class MoveValueHead(BaseCallback):
    """
    At the rollout's end (returns final), moves the value head by a fixed random amount, so the update's
    first predictions differ from the rollout's values in both directions; keeps what the update will see.
    """

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        head = self.model.policy.value_net
        generator = th.Generator().manual_seed(1)
        with th.no_grad():
            head.weight.add_(self.scale * th.randn(head.weight.shape, generator=generator))
        buffer = self.model.rollout_buffer
        self.obs = buffer.observations.copy()
        self.old_values = buffer.values.flatten().copy()
        self.returns = buffer.returns.flatten().copy()
        self.state = {key: value.clone() for key, value in self.model.policy.state_dict().items()}


def value_losses_of_one_update(model: PPO_REWARD, clip: float, **learn_kwargs) -> tuple[float, np.ndarray, ...]:
    """The logged value loss of one update; the unclipped and clipped squared errors and ``V - V_old``, computed here."""
    probe = MoveValueHead(scale=0.3)
    model.learn(N_STEPS, callback=probe, **learn_kwargs)
    logged = model.logger.name_to_value["train/value_loss"]
    model.policy.load_state_dict(probe.state)  # the predictions as the update's only minibatch saw them
    with th.no_grad():
        obs = th.as_tensor(probe.obs.reshape(-1, probe.obs.shape[-1]))
        values = model.policy.predict_values(obs).flatten().numpy().astype(np.float64)
    old, returns = probe.old_values.astype(np.float64), probe.returns.astype(np.float64)
    clipped = old + np.clip(values - old, -clip, clip)
    return logged, np.square(values - returns), np.square(clipped - returns), values - old


def test_logged_value_loss_is_half_the_mean_of_the_larger_squared_error():
    clip = 0.05
    model = preference_model(value_loss="clipped_max", clip_range_vf=clip, ent_coef=0.01)
    logged, unclipped, clipped, moved = value_losses_of_one_update(model, clip)
    # The batch exercises both sides of the max, and the window: otherwise the formulas below coincide.
    assert (np.abs(moved) > clip).mean() > 0.2
    assert (clipped > unclipped + 1e-6).any() and (unclipped > clipped + 1e-6).any()
    assert logged == pytest.approx(0.5 * np.maximum(unclipped, clipped).mean(), rel=1e-5)
    # Not SB3's clip_range_vf loss (the clipped error alone), with or without the 0.5, nor the unclipped one.
    for other in (clipped.mean(), 0.5 * clipped.mean(), 0.5 * unclipped.mean()):
        assert abs(logged - other) > 1e-3 * other
    # One minibatch: the logged total is the sum of the logged terms with their coefficients.
    logs = model.logger.name_to_value
    total = logs["train/policy_gradient_loss"] + 0.01 * logs["train/entropy_loss"] + 0.5 * logs["train/value_loss"]
    assert logs["train/loss"] == pytest.approx(total, rel=1e-5)
    assert logs["train/clip_range_vf"] == clip


def run(cls: type, env_id: str, steps: int = 256, **kwargs):
    env = make_vec_env(env_id, n_envs=2, seed=0)
    model = cls("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, policy_kwargs=NET, seed=0, **kwargs)
    return model.learn(steps)


def same_parameters(a, b) -> bool:
    return all(th.equal(x, y) for x, y in zip(a.policy.state_dict().values(), b.policy.state_dict().values()))


def train_logs(model) -> dict:
    return {key: value for key, value in model.logger.name_to_value.items() if key.startswith("train/")}


def test_default_runs_sb3s_update_bit_for_bit_and_the_option_changes_it():
    sb3 = run(PPO, "CartPole-v1", clip_range_vf=0.2)
    default = run(PPO_REWARD, "CartPole-v1", clip_range_vf=0.2, unsuper_flag=0)
    assert default.value_loss == "sb3"
    assert same_parameters(sb3, default)
    assert train_logs(sb3) == train_logs(default)
    clipped_max = run(PPO_REWARD, "CartPole-v1", clip_range_vf=0.2, unsuper_flag=0, value_loss="clipped_max")
    assert not same_parameters(sb3, clipped_max)


@pytest.mark.parametrize(
    "env_id, options",
    [
        # Discrete actions, raw advantages, a target_kl that stops the update early
        ("CartPole-v1", dict(normalize_advantage=False, target_kl=2e-4, learning_rate=3e-3)),
        # Box actions with gSDE, its noise drawn again every 4 steps while acting; normalised advantages
        ("Pendulum-v1", dict(use_sde=True, sde_sample_freq=4)),
    ],
)
def test_the_update_is_sb3s_apart_from_the_value_term(env_id, options):
    """
    With a window too wide to clip, ``0.5 * max(e, e) = 0.5 * e``: our update with twice SB3's ``vf_coef``
    minimises SB3's loss, so every other part of the update (surrogate, entropy, advantage
    normalisation, target_kl stop, gradient clipping, epoch count, logs) must give SB3's numbers.
    """
    sb3 = run(PPO, env_id, vf_coef=0.5, **options)
    ours = run(PPO_REWARD, env_id, vf_coef=1.0, value_loss="clipped_max", clip_range_vf=1e6, unsuper_flag=0, **options)
    for key, value in sb3.policy.state_dict().items():
        th.testing.assert_close(ours.policy.state_dict()[key], value, rtol=0, atol=1e-6)
    theirs, mine = train_logs(sb3), train_logs(ours)
    assert set(mine) == set(theirs) | {"train/clip_range_vf"}
    if "target_kl" in options:
        assert mine["train/n_updates"] < 4 * 2, "the target_kl stop must have cut updates short"
    assert mine["train/n_updates"] == theirs["train/n_updates"]
    assert mine["train/value_loss"] == pytest.approx(0.5 * theirs["train/value_loss"], rel=1e-5)
    for key in set(theirs) - {"train/value_loss", "train/loss"}:
        assert mine[key] == pytest.approx(theirs[key], rel=1e-5, abs=1e-8), key


def test_clipped_max_learns_cartpole_and_same_seed_gives_same_parameters():
    # A window narrow enough to bind: CartPole's returns grow by far more than 0.05 per rollout.
    settings = dict(clip_range_vf=0.05, value_loss="clipped_max", unsuper_flag=0, learning_rate=3e-3)
    assert same_parameters(run(PPO_REWARD, "CartPole-v1", **settings), run(PPO_REWARD, "CartPole-v1", **settings))
    model = run(PPO_REWARD, "CartPole-v1", steps=4096, **settings)
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=123)
    learned, _ = evaluate_policy(model, eval_env, n_eval_episodes=5, deterministic=True)
    # A uniformly random policy lasts about 22 steps, this untrained policy's greedy actions 32; trained
    # (seed 0, 4096 steps) it reaches the 500-step limit.
    assert learned > 150, learned


def test_clipped_max_without_clip_range_vf_is_refused_before_training():
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=0)
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=8, mb_size=16, seed=0)
    with pytest.raises(ValueError, match=r"value_loss='clipped_max'.*clip_range_vf.*None: pass clip_range_vf"):
        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, value_loss="clipped_max")
    assert reward_model.size_segment == 8
    with pytest.raises(ValueError, match="value_loss must be one of"):
        PPO_REWARD("MlpPolicy", env, value_loss="clipped", clip_range_vf=0.2)


def test_save_load_keeps_the_option(tmp_path):
    clip = 0.05
    model = preference_model(value_loss="clipped_max", clip_range_vf=clip)
    model.learn(N_STEPS)
    model.save(tmp_path / "model")
    loaded = PPO_REWARD.load(tmp_path / "model", env=make_vec_env("Pendulum-v1", n_envs=1, seed=1))
    assert loaded.value_loss == "clipped_max" and loaded.clip_range_vf(1.0) == clip
    # The loaded model's update is the clipped maximum, not SB3's.
    logged, unclipped, clipped, _ = value_losses_of_one_update(loaded, clip, reset_num_timesteps=False)
    assert logged == pytest.approx(0.5 * np.maximum(unclipped, clipped).mean(), rel=1e-5)
    assert abs(logged - clipped.mean()) > 1e-3 * logged
    with pytest.raises(ValueError, match="clip_range_vf"):
        PPO_REWARD.load(tmp_path / "model", clip_range_vf=None)


def test_rlhf_preset_turns_the_option_on():
    assert RLHF_PRESET["value_loss"] == "clipped_max" and RLHF_PRESET["clip_range_vf"] == 0.2
    model = preference_model(reference_policy="initial", **RLHF_PRESET)
    assert model.value_loss == "clipped_max" and model.clip_range_vf(1.0) == 0.2
