"""
Human feedback: a person labels the queries on a local web page (``pip install -e '.[human]'`` in a checkout).

``HumanTeacher`` plugs into ``PPO_REWARD`` like a scripted teacher; ``RenderStateWrapper`` records
the simulator states its clips are rendered from; ``MixedTeacher`` lets a scripted teacher answer
most queries while a person answers a sample; ``LabelStore`` is the durable record of the answers.
"""

from sb3_pref.human.callbacks import HumanFeedbackCallback
from sb3_pref.human.choices import CHOICE_LABELS
from sb3_pref.human.mixed import MixedTeacher
from sb3_pref.human.rendering import RenderStateWrapper, SegmentRenderer, StateCodec, write_video
from sb3_pref.human.server import FeedbackServer
from sb3_pref.human.store import LabelStore
from sb3_pref.human.teacher import HumanTeacher

__all__ = [
    "CHOICE_LABELS",
    "FeedbackServer",
    "HumanFeedbackCallback",
    "HumanTeacher",
    "LabelStore",
    "MixedTeacher",
    "RenderStateWrapper",
    "SegmentRenderer",
    "StateCodec",
    "write_video",
]
