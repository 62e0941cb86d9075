"""PrefPPO (B-Pref): PPO trained on a reward model learned from preferences over segment pairs."""

import functools
from typing import Any, Callable, Optional, TypeVar, Union

import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import GymEnv, MaybeCallback, Schedule

from sb3_pref.common.onpolicy import PreferenceRewardMixin
from sb3_pref.common.options import ON_POLICY, document_options, passed_on
from sb3_pref.common.rlhf import ReferenceSource
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.teachers import BaseTeacher
from sb3_pref.ppo_reward.value_loss import ValueLossMixin, check_value_loss

SelfPPOReward = TypeVar("SelfPPOReward", bound="PPO_REWARD")
_Init = TypeVar("_Init", bound=Callable[..., None])


def accept_reward_model_first(init: _Init) -> _Init:
    """
    Lets ``__init__`` also take B-Pref's call shape ``(reward_model, policy, env, **kwargs)``.

    A wrapper keeps the explicit signature visible to ``inspect``/``help`` (through ``__wrapped__``)
    while moving a leading :class:`RewardModel` to the ``reward_model`` keyword before Python binds
    the arguments, which a plain signature cannot do without clashing with ``learning_rate=...``. That call
    shape also defaults to ``feedback_schedule="bpref"`` (B-Pref's fixed schedule).
    """

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        if args and isinstance(args[0], RewardModel):
            if kwargs.get("reward_model") is not None:
                raise ValueError("reward_model was given both positionally and as a keyword: pass it once")
            kwargs["reward_model"], args = args[0], args[1:]
            # B-Pref's call shape gets B-Pref's fixed schedule, so its scripts' results stay reproducible.
            kwargs.setdefault("feedback_schedule", "bpref")
        init(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


@document_options(ON_POLICY)
class PPO_REWARD(PreferenceRewardMixin, ValueLossMixin, PPO):  # B-Pref's name, kept so its scripts run unchanged
    """
    Proximal Policy Optimization on a learned reward (PrefPPO, from the B-Pref benchmark).

    A drop-in replacement for :class:`stable_baselines3.PPO`: every PPO argument is accepted and
    means the same. Both call shapes work::

        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=1000)
        PPO_REWARD(reward_model, MlpPolicy, env, num_interaction=16000, max_feed=1000)  # B-Pref's (its schedule)

    From a config file (RL Zoo's YAML, Optuna), give ``reward_model_kwargs`` instead of an object:
    the model is built from the env's spaces, as ``policy_kwargs`` builds the policy.

    ``learn(total_timesteps, unsuper_flag=1)`` first maximises state entropy for ``unsuper_step``
    env steps, then asks a first round of queries, then ``reward_model.mb_size`` queries every ``num_interaction``
    steps until ``max_feed`` queries were asked, training the policy on the model's predicted reward. The true
    reward is only used by a scripted teacher and for logging (``rollout/ep_rew_mean``). Whatever of these is left
    unset is planned from ``total_timesteps`` and ``max_feed`` when ``learn`` starts (``feedback_schedule="auto"``,
    :mod:`~sb3_pref.core.feedback_plan`); the plan in force is ``model.feedback_plan``.

    :param policy: the policy model (``"MlpPolicy"``, ``"CnnPolicy"``, ``"MultiInputPolicy"`` or a class)
    :param env: the environment to learn from (an env, a VecEnv, or a registered id)
    :param learning_rate: as in PPO
    :param n_steps: as in PPO
    :param batch_size: as in PPO
    :param n_epochs: as in PPO
    :param gamma: as in PPO
    :param gae_lambda: as in PPO
    :param clip_range: as in PPO
    :param clip_range_vf: as in PPO
    :param normalize_advantage: as in PPO
    :param ent_coef: as in PPO
    :param vf_coef: as in PPO
    :param max_grad_norm: as in PPO
    :param use_sde: as in PPO
    :param sde_sample_freq: as in PPO
    :param rollout_buffer_class: as in PPO
    :param rollout_buffer_kwargs: as in PPO
    :param target_kl: as in PPO
    :param stats_window_size: as in PPO
    :param tensorboard_log: as in PPO
    :param policy_kwargs: as in PPO
    :param verbose: as in PPO
    :param seed: as in PPO; also seeds an unseeded reward model and scripted teacher
    :param device: as in PPO (the policy's device; the reward model has its own ``device``)
    :param _init_setup_model: as in PPO
    (then the preference options, declared in sb3_pref.common.options: see help() or the table of the API page)
    :param value_loss: ``"sb3"``: SB3's value loss (``mean((V - R)^2)``, of the clipped prediction when
        ``clip_range_vf`` is set), SB3's update unchanged; ``"clipped_max"``: the RLHF document's
        ``0.5 * mean(max((V - R)^2, (V_clipped - R)^2))`` with
        ``V_clipped = V_old + clamp(V - V_old, -clip_range_vf, clip_range_vf)`` (needs ``clip_range_vf``;
        the 0.5 is in the loss, so ``vf_coef`` weighs it half as much as SB3's), see
        :mod:`~sb3_pref.ppo_reward.value_loss`
    """

    @accept_reward_model_first
    def __init__(
        self,
        policy: Union[str, type[ActorCriticPolicy]],
        env: Union[GymEnv, str],
        learning_rate: Union[float, Schedule] = 3e-4,
        n_steps: int = 2048,
        batch_size: int = 64,
        n_epochs: int = 10,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        clip_range: Union[float, Schedule] = 0.2,
        clip_range_vf: Union[float, Schedule, None] = None,
        normalize_advantage: bool = True,
        ent_coef: float = 0.0,
        vf_coef: float = 0.5,
        max_grad_norm: float = 0.5,
        use_sde: bool = False,
        sde_sample_freq: int = -1,
        rollout_buffer_class: Optional[type[RolloutBuffer]] = None,
        rollout_buffer_kwargs: Optional[dict[str, Any]] = None,
        target_kl: Optional[float] = None,
        stats_window_size: int = 100,
        tensorboard_log: Optional[str] = None,
        policy_kwargs: Optional[dict[str, Any]] = None,
        verbose: int = 0,
        seed: Optional[int] = None,
        device: Union[th.device, str] = "auto",
        _init_setup_model: bool = True,
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
        unsuper_n_epochs: Optional[int] = None,
        unsuper_reset_policy: bool = False,
        size_segment: Optional[int] = None,
        max_ep_len: Optional[int] = None,
        unsuper_flag: Optional[int] = None,
        normalize_reward: bool = False,
        anneal_reward_lr: bool = False,
        segment_capacity: int = 100_000,
        entropy_k: int = 5,
        reward_schedule: str = "auto",
        reference_policy: ReferenceSource = None,
        kl_coef: float = 0.1,
        kl_target: Optional[float] = None,
        kl_horizon: int = 10_000,
        normalize_reward_before: bool = False,
        normalize_reward_samples: str = "recent",
        whiten_reward: bool = False,
        zero_value_head: bool = False,
        anneal_policy_lr: bool = False,
        n_eval_pairs: int = 256,
        first_round_uniform: bool = True,
        rime: bool = False,
        rune_beta: float = 0.0,
        rune_decay: float = 0.0,
        qpa_episodes: int = 0,
        surf: bool = False,
        qpa_crops: int = 0,
        # PPO_REWARD's own: the update's value loss.
        value_loss: str = "sb3",
    ) -> None:
        arguments = dict(locals())
        check_value_loss(value_loss, clip_range_vf)
        self.value_loss = value_loss
        # PPO's arguments go to PPO, the preference options to PreferenceRewardMixin, all by name.
        super().__init__(**passed_on(arguments, "value_loss"))

    def learn(
        self: SelfPPOReward,
        total_timesteps: int,
        callback: MaybeCallback = None,
        log_interval: int = 1,
        tb_log_name: Optional[str] = "PPO_REWARD",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
        unsuper_flag: Optional[int] = None,
    ) -> SelfPPOReward:
        """
        PPO's ``learn`` plus B-Pref's ``unsuper_flag``.

        :param total_timesteps: env steps to train for (summed over envs)
        :param callback: callback(s) called at every step, seeing the relabelled rollout
        :param log_interval: log every this many rollouts
        :param tb_log_name: tensorboard run name
        :param reset_num_timesteps: start the step counter (and the logger) anew
        :param progress_bar: show a progress bar (needs tqdm and rich)
        :param unsuper_flag: 1 pretraining then preferences, 2 pretraining then the true reward, 0 no
            pretraining; None keeps the constructor's
        :return: the trained model
        """
        return super().learn(
            total_timesteps=total_timesteps,
            callback=callback,
            log_interval=log_interval,
            tb_log_name=tb_log_name,
            reset_num_timesteps=reset_num_timesteps,
            progress_bar=progress_bar,
            unsuper_flag=unsuper_flag,
        )


PrefPPO = PPO_REWARD
