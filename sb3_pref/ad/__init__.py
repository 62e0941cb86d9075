"""Algorithm Distillation: learning histories of single-task learners, distilled into a causal transformer."""

from sb3_pref.ad.ad import AD, resolve_precision
from sb3_pref.ad.collect import collect_histories, record_learner
from sb3_pref.ad.histories import HISTORY_FORMAT_VERSION, Histories, HistoryRecorder, RecordHistoryCallback
from sb3_pref.ad.learners import (
    A2C_SEED_SETTINGS,
    DQN_TABULAR_SETTINGS,
    CellsExtractor,
    NoisyExpert,
    QLearning,
    make_a2c_learner,
    make_dqn_learner,
)
from sb3_pref.ad.model import ADConfig, ADTransformer
from sb3_pref.ad.views import first_success_views

__all__ = [
    "A2C_SEED_SETTINGS",
    "AD",
    "DQN_TABULAR_SETTINGS",
    "HISTORY_FORMAT_VERSION",
    "ADConfig",
    "ADTransformer",
    "CellsExtractor",
    "Histories",
    "HistoryRecorder",
    "NoisyExpert",
    "QLearning",
    "RecordHistoryCallback",
    "collect_histories",
    "first_success_views",
    "make_a2c_learner",
    "make_dqn_learner",
    "record_learner",
    "resolve_precision",
]
