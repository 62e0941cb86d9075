from sb3_pref.rl2.policies import (
    CnnGruPolicy,
    CnnLstmPolicy,
    MlpGruPolicy,
    MlpLstmPolicy,
    MultiInputGruPolicy,
    MultiInputLstmPolicy,
    RL2Policy,
)
from sb3_pref.rl2.rl2 import RL2

__all__ = [
    "RL2",
    "CnnGruPolicy",
    "CnnLstmPolicy",
    "MlpGruPolicy",
    "MlpLstmPolicy",
    "MultiInputGruPolicy",
    "MultiInputLstmPolicy",
    "RL2Policy",
]
