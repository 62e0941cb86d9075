import importlib
import os
from typing import TYPE_CHECKING, Any

# Registers the benchmark tasks' gymnasium ids (B-Pref's names) without importing dm_control or Meta-World.
import sb3_pref.envs  # noqa: F401
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.query import QUERY_METHODS
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.segments import SegmentBatch, SegmentStore
from sb3_pref.core.teachers import BaseTeacher, ScriptedTeacher
from sb3_pref.ppo_reward import PPO_REWARD, PrefPPO
from sb3_pref.sac_reward import PEBBLE, SAC_REWARD

if TYPE_CHECKING:
    from sb3_pref.ad import AD
    from sb3_pref.human import HumanTeacher
    from sb3_pref.rl2 import RL2

#: Root names whose packages load on first use, so that ``import sb3_pref`` does not import the transformer,
#: sb3-contrib's recurrent PPO or the labelling page (whose optional dependencies may be missing).
_LAZY = {"AD": "sb3_pref.ad", "HumanTeacher": "sb3_pref.human", "RL2": "sb3_pref.rl2"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


with open(os.path.join(os.path.dirname(__file__), "version.txt")) as file_handler:
    __version__ = file_handler.read().strip()

__all__ = [
    "AD",
    "PEBBLE",
    "PPO_REWARD",
    "QUERY_METHODS",
    "RL2",
    "SAC_REWARD",
    "BaseTeacher",
    "HumanTeacher",
    "PrefPPO",
    "PreferenceDataset",
    "PreferenceLearner",
    "RewardModel",
    "ScriptedTeacher",
    "SegmentBatch",
    "SegmentStore",
    "__version__",
]
