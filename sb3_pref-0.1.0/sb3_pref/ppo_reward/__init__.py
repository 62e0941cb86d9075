from sb3_pref.ppo_reward.ppo_reward import PPO_REWARD, PrefPPO

__all__ = ["PPO_REWARD", "PrefPPO"]
