"""PrefPPO (B-Pref): PPO trained on a reward model learned from preferences over segment pairs."""

from typing import Any, TypeVar

from stable_baselines3 import PPO

from sb3_pref.common.reward_model import RewardModel
from sb3_pref.common.sb3_glue import PreferenceRewardMixin

SelfPPOReward = TypeVar("SelfPPOReward", bound="PPO_REWARD")


class PPO_REWARD(PreferenceRewardMixin, PPO):  # B-Pref's name, kept so its scripts run unchanged
    """
    Proximal Policy Optimization on a learned reward (PrefPPO, from the B-Pref benchmark).

    A drop-in replacement for :class:`stable_baselines3.PPO`: every PPO argument is accepted and
    means the same. Both call shapes work::

        PPO_REWARD("MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=1000)
        PPO_REWARD(reward_model, MlpPolicy, env, num_interaction=16000, max_feed=1000)  # B-Pref's

    ``learn(total_timesteps, unsuper_flag=1)`` first maximises state entropy for ``unsuper_step``
    env steps, then asks ``reward_model.mb_size`` queries every ``num_interaction`` steps until
    ``max_feed`` queries were asked, training the policy on the model's predicted reward. The true
    reward is only used by a scripted teacher and for logging (``rollout/ep_rew_mean``).

    Preference arguments (see :class:`~sb3_pref.common.sb3_glue.PreferenceRewardMixin`):
    ``reward_model, teacher, num_interaction, num_feed, feed_type, re_update, metaworld_flag,
    max_feed, unsuper_step, unsuper_n_epochs, size_segment, max_ep_len, unsuper_flag,
    normalize_reward, anneal_reward_lr, segment_capacity, entropy_k``.

    :param args: ``(policy, env)``, optionally preceded by the reward model (B-Pref's order)
    :param kwargs: PPO's keyword arguments and the preference arguments above
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and isinstance(args[0], RewardModel):
            if "reward_model" in kwargs:
                raise ValueError("reward_model was given both positionally and as a keyword: pass it once")
            kwargs["reward_model"], args = args[0], args[1:]
        super().__init__(*args, **kwargs)


PrefPPO = PPO_REWARD
