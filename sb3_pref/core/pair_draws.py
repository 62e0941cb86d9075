"""
Where the preference learner's segment pairs come from. Every draw takes two segments per pair from the segment
store, with the generator it is handed, so that the learner's streams stay apart (a round's queries on the
learner's stream, SURF's unlabelled pool on SURF's, the agreement diagnostic on its own):

- :func:`draw_pairs`: pairs as drawn (SURF's pool, the diagnostic's fresh pairs);
- :func:`draw_queries`: a round's candidate pairs, then those a query rule picks among them;
- :func:`oracle_agreement`: how often the reward model ranks fresh pairs as their true returns do.
"""

from typing import Optional

import numpy as np

from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.query import candidate_count, select_queries
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.segments import SegmentBatch, SegmentStore


def draw_pairs(
    store: SegmentStore, n_pairs: int, size_segment: int, rng: np.random.Generator, recent_episodes: Optional[int] = None
) -> tuple[SegmentBatch, SegmentBatch]:
    """
    :param store: the stored transitions
    :param n_pairs: pairs to draw
    :param size_segment: steps per segment
    :param rng: the generator to draw with (all first segments, then all second ones)
    :param recent_episodes: draw from the newest this many episodes only (QPA); None: from every stored episode
    :return: the first and the second segment of each pair
    """
    seg_0 = store.sample(n_pairs, size_segment, rng, recent_episodes=recent_episodes)
    seg_1 = store.sample(n_pairs, size_segment, rng, recent_episodes=recent_episodes)
    return seg_0, seg_1


def draw_queries(
    store: SegmentStore,
    reward_model: RewardModel,
    dataset: PreferenceDataset,
    rng: np.random.Generator,
    method: str,
    n_queries: int,
    recent_episodes: Optional[int] = None,
) -> tuple[SegmentBatch, SegmentBatch]:
    """
    One round's queries: ``candidate_count`` candidate pairs, of which the query rule keeps ``n_queries``.

    :param store: the stored transitions
    :param reward_model: scores the candidates (the uncertainty rules) and sets the segment length
    :param dataset: the labelled pairs, which k-center keeps the new queries away from
    :param rng: the learner's generator
    :param method: a name of :data:`~sb3_pref.core.query.QUERY_METHODS`
    :param n_queries: pairs to ask
    :param recent_episodes: draw from the newest this many episodes only (QPA); None: from every stored episode
    :return: the first and the second segment of each query
    """
    n_candidates = candidate_count(method, n_queries, reward_model.large_batch)
    seg_0, seg_1 = draw_pairs(store, n_candidates, reward_model.size_segment, rng, recent_episodes)
    if method == "uniform":
        return seg_0, seg_1
    returns_0 = reward_model.member_returns(seg_0.features)
    returns_1 = reward_model.member_returns(seg_1.features)
    labelled_0 = labelled_1 = None
    if "kcenter" in method and len(dataset) > 0:
        obs_dim = reward_model.obs_dim
        labelled_0 = dataset.features_0[..., :obs_dim]
        labelled_1 = dataset.features_1[..., :obs_dim]
    index = select_queries(
        method, n_queries, returns_0, returns_1, seg_0.obs, seg_1.obs, labelled_obs_0=labelled_0, labelled_obs_1=labelled_1
    )
    return seg_0.take(index), seg_1.take(index)


def oracle_agreement(
    store: SegmentStore,
    reward_model: RewardModel,
    n_pairs: int,
    rng: np.random.Generator,
    recent_episodes: Optional[int] = None,
) -> float:
    """
    :param store: the stored transitions
    :param reward_model: the model measured
    :param n_pairs: fresh pairs to measure on
    :param rng: the diagnostic's own generator (drawing it leaves every other stream as it was)
    :param recent_episodes: draw from the newest this many episodes only (where the policy is now); None: from every
        stored episode
    :return: the share of fresh pairs the model ranks as a perfectly rational teacher would (ties left out); NaN when
        nothing is measured
    """
    # No stored episode piece holds a segment (a policy that now ends its episodes early): nothing to measure. A
    # diagnostic must not end a run that training itself waits out.
    if n_pairs <= 0 or len(store) == 0 or not store.fits(reward_model.size_segment):
        return float("nan")
    seg_0, seg_1 = draw_pairs(store, n_pairs, reward_model.size_segment, rng, recent_episodes)
    true_0, true_1 = seg_0.rewards.sum(1), seg_1.rewards.sum(1)
    labels = np.where(true_0 == true_1, np.nan, (true_1 > true_0).astype(np.float64))
    return reward_model.preference_accuracy(seg_0.features, seg_1.features, labels)


__all__ = ["draw_pairs", "draw_queries", "oracle_agreement"]
