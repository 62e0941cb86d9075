"""PEBBLE (Lee, Smith and Abbeel, 2021; B-Pref): SAC on a reward model learned from preferences."""

from typing import Any, Optional, TypeVar, Union

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
from sb3_pref.common.reward_model import RewardModel
from sb3_pref.common.teachers import BaseTeacher

SelfSACReward = TypeVar("SelfSACReward", bound="SAC_REWARD")


def _check_action_space(env: Union[GymEnv, str, None]) -> None:
    action_space = getattr(env, "action_space", None)
    if action_space is not None and not isinstance(action_space, spaces.Box):
        raise ValueError(
            f"SAC_REWARD (PEBBLE) needs a continuous (Box) action space, but the env's is {action_space}: "
            "use PPO_REWARD for discrete actions"
        )


# The mixins are typed against OnPolicyAlgorithm (their usual host), hence the ignore: SAC's members win at run time.
class SAC_REWARD(OffPolicyPreferenceMixin, SAC):  # type: ignore[misc]  # B-Pref-style name, beside PPO_REWARD
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
    followed by a full relabel of the buffer. Defaults of the preference arguments follow B-Pref's
    ``train_PEBBLE.yaml`` (``unsuper_step`` its scripts' 9000); SAC's are SB3's.

    :param policy: the policy model (``"MlpPolicy"``, ...), or the reward model in B-Pref's order
    :param env: the environment, or the policy in B-Pref's order
    :param learning_rate: as SAC (in B-Pref's order: the env)
    :param reward_model: the learned reward; None trains on the env's reward (after optional pretraining)
    :param reward_model_kwargs: :class:`~sb3_pref.common.reward_model.RewardModel` arguments without the
        spaces, for config files: the model is built from the env's spaces
    :param teacher: who answers queries: a teacher object or a B-Pref preset name; None uses ``reward_model.teacher``
    :param num_interaction: env steps (summed over envs) between query rounds
    :param num_feed: accepted for B-Pref compatibility (no effect)
    :param feed_type: query selection, 0-5 or a name (see :data:`~sb3_pref.QUERY_METHODS`)
    :param re_update: the most reward-model epochs per round (early stop at 97% training accuracy)
    :param metaworld_flag: accepted for B-Pref compatibility; success is logged whenever the env reports it
    :param max_feed: total feedback budget
    :param unsuper_step: env steps of state-entropy pretraining after the ``learning_starts`` seed steps
    :param size_segment: segment length; overrides ``reward_model.size_segment`` when given
    :param max_ep_len: episode length for the teacher's thresholds; None uses the observed mean
    :param unsuper_flag: default of ``learn(unsuper_flag=...)``: 1 pretraining then preferences, 2
        pretraining then the true reward, 0 none; None: 1 with a reward model, 0 without
    :param normalize_reward: rescale predictions to mean 0 / std 1 on recent transitions after each refit
    :param anneal_reward_lr: decay the reward model's learning rate linearly to 0 within each round
    :param segment_capacity: transitions kept for drawing query segments
    :param entropy_k: k of the k-NN state-entropy reward
    :param reset_update: extra gradient steps right after the critic reset
    :param relabel_chunk_size: transitions per reward-model pass when relabelling the replay buffer
    :param reward_schedule: how much the reward model trains per round, ``"auto"`` or ``"bpref"``
        (see :class:`~sb3_pref.PPO_REWARD`)
    :param normalize_reward_before: fit the reward's gain/bias on recent transitions before each refit as well
    :param anneal_policy_lr: the actor's, critic's and entropy coefficient's learning rate decays linearly
        to 0 over each ``learn`` call

    PPO_REWARD's other RLHF options (``reference_policy``, the KL penalty, ``whiten_reward``,
    ``zero_value_head``) act on an on-policy rollout and its value head; SAC_REWARD does not take them.
    """

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
        reward_model: Optional[RewardModel] = None,
        reward_model_kwargs: Optional[dict[str, Any]] = None,
        teacher: Union[BaseTeacher, str, None] = None,
        num_interaction: int = 5000,
        num_feed: int = 1,
        feed_type: Union[int, str] = 0,
        re_update: int = 200,
        metaworld_flag: bool = False,
        max_feed: int = 1400,
        unsuper_step: int = 9000,
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
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            buffer_size=buffer_size,
            learning_starts=learning_starts,
            batch_size=batch_size,
            tau=tau,
            gamma=gamma,
            train_freq=train_freq,
            gradient_steps=gradient_steps,
            action_noise=action_noise,
            replay_buffer_class=replay_buffer_class,
            replay_buffer_kwargs=replay_buffer_kwargs,
            optimize_memory_usage=optimize_memory_usage,
            n_steps=n_steps,
            ent_coef=ent_coef,
            target_update_interval=target_update_interval,
            target_entropy=target_entropy,
            use_sde=use_sde,
            sde_sample_freq=sde_sample_freq,
            use_sde_at_warmup=use_sde_at_warmup,
            stats_window_size=stats_window_size,
            tensorboard_log=tensorboard_log,
            policy_kwargs=policy_kwargs,
            verbose=verbose,
            seed=seed,
            device=device,
            reward_model=reward_model,
            reward_model_kwargs=reward_model_kwargs,
            teacher=teacher,
            num_interaction=num_interaction,
            num_feed=num_feed,
            feed_type=feed_type,
            re_update=re_update,
            metaworld_flag=metaworld_flag,
            max_feed=max_feed,
            unsuper_step=unsuper_step,
            size_segment=size_segment,
            max_ep_len=max_ep_len,
            unsuper_flag=unsuper_flag,
            normalize_reward=normalize_reward,
            anneal_reward_lr=anneal_reward_lr,
            segment_capacity=segment_capacity,
            entropy_k=entropy_k,
            reset_update=reset_update,
            relabel_chunk_size=relabel_chunk_size,
            reward_schedule=reward_schedule,
            normalize_reward_before=normalize_reward_before,
            anneal_policy_lr=anneal_policy_lr,
            _init_setup_model=_init_setup_model,
        )

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
