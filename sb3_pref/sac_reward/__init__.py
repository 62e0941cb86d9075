from sb3_pref.sac_reward.sac_reward import PEBBLE, SAC_REWARD

__all__ = ["PEBBLE", "SAC_REWARD"]
