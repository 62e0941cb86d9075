"""PEBBLE (Lee, Smith and Abbeel, 2021; B-Pref): SAC on a reward model learned from preferences."""

import functools
from typing import Any, Callable, Optional, TypeVar, Union

import gymnasium as gym
import torch as th
from gymnasium import spaces
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.noise import ActionNoise
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.sac.policies import SACPolicy

from sb3_pref.common.offpolicy import OffPolicyPreferenceMixin
from sb3_pref.common.options import OFF_POLICY, document_options, passed_on
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.teachers import BaseTeacher

SelfSACReward = TypeVar("SelfSACReward", bound="SAC_REWARD")
_Init = TypeVar("_Init", bound=Callable[..., None])


def _check_action_space(env: Union[GymEnv, str, None]) -> None:
    action_space = getattr(env, "action_space", None)
    if action_space is not None and not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"SAC_REWARD (PEBBLE) needs a continuous (Box) action space, but the env's is {action_space}: "
            "use PPO_REWARD for discrete actions"
        )


def bpref_order_schedule(init: _Init) -> _Init:
    """B-Pref's call shape, with the reward model first, defaults to B-Pref's fixed schedule (``feedback_schedule``)."""

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(args[0] if args else kwargs.get("policy"), RewardModel):
            kwargs.setdefault("feedback_schedule", "bpref")
        init(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


@document_options(OFF_POLICY)
class SAC_REWARD(OffPolicyPreferenceMixin, SAC):  # B-Pref-style name, beside PPO_REWARD
    """
    Soft Actor-Critic on a learned reward: PEBBLE, B-Pref's off-policy preference learner.

    A drop-in replacement for :class:`stable_baselines3.SAC` (every SAC argument means the same)
    plus the preference arguments of :class:`~sb3_pref.PPO_REWARD`. Both call shapes work::

        SAC_REWARD("MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=1000)
        SAC_REWARD(reward_model, "MlpPolicy", env, max_feed=1000)  # PPO_REWARD's B-Pref order

    ``learn(total_timesteps, unsuper_flag=1)`` maximises state entropy during the ``learning_starts``
    seed steps and ``unsuper_step`` more steps, then asks a uniform query round, relabels the whole
    replay buffer, resets the critic and takes ``reset_update`` extra gradient steps; afterwards a
    query round runs every ``num_interaction`` steps until ``max_feed`` queries were asked, each
    followed by a full relabel of the buffer. Whatever of the schedule is left unset is planned from
    ``total_timesteps`` and ``max_feed`` when ``learn`` starts (``feedback_schedule="auto"``); with
    ``feedback_schedule="bpref"`` (the default of the reward-model-first call shape) it follows B-Pref's
    ``train_PEBBLE.yaml`` (9000 pretraining steps, 128 queries every 5000 steps, 200 reward passes). SAC's
    arguments are SB3's.

    :param policy: the policy model (``"MlpPolicy"``, ...), or the reward model in B-Pref's order
    :param env: the environment, or the policy in B-Pref's order
    :param learning_rate: as SAC (in B-Pref's order: the env)
    :param buffer_size: as in SAC
    :param learning_starts: as in SAC
    :param batch_size: as in SAC
    :param tau: as in SAC
    :param gamma: as in SAC
    :param train_freq: as in SAC
    :param gradient_steps: as in SAC
    :param action_noise: as in SAC
    :param replay_buffer_class: as in SAC
    :param replay_buffer_kwargs: as in SAC
    :param optimize_memory_usage: as in SAC
    :param n_steps: as in SAC
    :param ent_coef: as in SAC
    :param target_update_interval: as in SAC
    :param target_entropy: as in SAC
    :param use_sde: as in SAC
    :param sde_sample_freq: as in SAC
    :param use_sde_at_warmup: as in SAC
    :param stats_window_size: as in SAC
    :param tensorboard_log: as in SAC
    :param policy_kwargs: as in SAC
    :param verbose: as in SAC
    :param seed: as in SAC
    :param device: as in SAC
    (then the preference options, declared in sb3_pref.common.options: see help() or the table of the API page)
    :param _init_setup_model: as in SAC

    PPO_REWARD's other RLHF options (``reference_policy``, the KL penalty, ``whiten_reward``,
    ``zero_value_head``) act on an on-policy rollout and its value head; SAC_REWARD does not take them.
    """

    @bpref_order_schedule
    def __init__(
        self,
        policy: Union[str, type[SACPolicy], RewardModel],
        env: Union[GymEnv, str, type[SACPolicy], None],
        learning_rate: Union[float, Schedule, GymEnv, str] = 3e-4,
        buffer_size: int = 1_000_000,
        learning_starts: int = 100,
        batch_size: int = 256,
        tau: float = 0.005,
        gamma: float = 0.99,
        train_freq: Union[int, tuple[int, str]] = 1,
        gradient_steps: int = 1,
        action_noise: Optional[ActionNoise] = None,
        replay_buffer_class: Optional[type[ReplayBuffer]] = None,
        replay_buffer_kwargs: Optional[dict[str, Any]] = None,
        optimize_memory_usage: bool = False,
        n_steps: int = 1,
        ent_coef: Union[str, float] = "auto",
        target_update_interval: int = 1,
        target_entropy: Union[str, float] = "auto",
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        use_sde_at_warmup: bool = False,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: Union[th.device, str] = "auto",
        # The preference options, as declared in sb3_pref.common.options (tests/test_options.py compares them).
        reward_model: Optional[RewardModel] = None,
        reward_model_kwargs: Optional[dict[str, Any]] = None,
        teacher: Union[BaseTeacher, str, None] = None,
        feedback_schedule: str = "auto",
        num_interaction: Optional[int] = None,
        num_feed: int = 1,
        feed_type: Union[int, str, None] = None,
        re_update: Optional[int] = None,
        metaworld_flag: bool = False,
        max_feed: int = 1400,
        unsuper_step: Optional[int] = None,
        size_segment: Optional[int] = None,
        max_ep_len: Optional[int] = None,
        unsuper_flag: Optional[int] = None,
        normalize_reward: bool = False,
        anneal_reward_lr: bool = False,
        segment_capacity: int = 100_000,
        entropy_k: int = 5,
        reset_update: int = 100,
        relabel_chunk_size: int = 16384,
        reward_schedule: str = "auto",
        normalize_reward_before: bool = False,
        anneal_policy_lr: bool = False,
        n_eval_pairs: int = 256,
        first_round_uniform: bool = True,
        rime: bool = False,
        rune_beta: float = 0.0,
        rune_decay: float = 0.0,
        qpa_episodes: int = 0,
        surf: bool = False,
        qpa_crops: int = 0,
        reset_critic: bool = True,
        rime_warm_start: bool = False,
        _init_setup_model: bool = True,
    ) -> None:
        if isinstance(policy, RewardModel):
            if reward_model is not None:
                raise ValueError("reward_model was given both positionally and as a keyword: pass it once")
            if not isinstance(learning_rate, (str, gym.Env, VecEnv)):
                raise ValueError("with the reward model first, the order is SAC_REWARD(reward_model, policy, env, ...)")
            reward_model, policy, env, learning_rate = policy, env, learning_rate, 3e-4  # type: ignore[assignment]
        _check_action_space(env)  # type: ignore[arg-type]
        if isinstance(env, str) and _init_setup_model:
            # SB3 would make the env inside; make it here to check its action space first.
            env = gym.make(env)
            _check_action_space(env)
        # SAC's arguments go to SAC, the preference options to OffPolicyPreferenceMixin, all by name.
        super().__init__(**passed_on(locals()))

    def learn(
        self: SelfSACReward,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 4,
        tb_log_name: Optional[str] = None,
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
        unsuper_flag: Optional[int] = None,
    ) -> SelfSACReward:
        """
        SAC's ``learn`` plus B-Pref's ``unsuper_flag`` (see the class docstring; None keeps the constructor's).
        """
        self._check_reward_normalization()
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
            unsuper_flag=unsuper_flag,
        )


PEBBLE = SAC_REWARD
