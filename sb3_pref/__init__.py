import os

# Registers the benchmark tasks' gymnasium ids (B-Pref's names) without importing dm_control or Meta-World.
import sb3_pref.envs  # noqa: F401
from sb3_pref.common.learner import PreferenceLearner
from sb3_pref.common.preferences import PreferenceDataset
from sb3_pref.common.query import QUERY_METHODS
from sb3_pref.common.reward_model import RewardModel
from sb3_pref.common.segments import SegmentBatch, SegmentStore
from sb3_pref.common.teachers import BaseTeacher, ScriptedTeacher
from sb3_pref.ppo_reward import PPO_REWARD, PrefPPO
from sb3_pref.sac_reward import PEBBLE, SAC_REWARD

with open(os.path.join(os.path.dirname(__file__), "version.txt")) as file_handler:
    __version__ = file_handler.read().strip()

__all__ = [
    "PEBBLE",
    "PPO_REWARD",
    "QUERY_METHODS",
    "SAC_REWARD",
    "BaseTeacher",
    "PrefPPO",
    "PreferenceDataset",
    "PreferenceLearner",
    "RewardModel",
    "ScriptedTeacher",
    "SegmentBatch",
    "SegmentStore",
    "__version__",
]
