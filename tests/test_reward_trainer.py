"""The reward trainer's seams (issue 43): a label filter and extra loss terms change training, and nothing else does."""

import numpy as np
import pytest
import torch as th

from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.reward_model import RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.core.teachers import ScriptedTeacher
from tests.test_reward_model import ACT_DIM, OBS_DIM, SMALL, TRUE_WEIGHTS, make_segments


def labelled(n: int, flip: np.ndarray, seed: int = 0) -> PreferenceDataset:
    """Oracle labels of ``n`` random pairs, with the pairs where ``flip`` is True labelled the wrong way."""
    rng = np.random.default_rng(seed)
    seg_0, seg_1 = make_segments(rng, n), make_segments(rng, n)
    labels = ScriptedTeacher().label_pairs(seg_0, seg_1)
    labels[flip] = 1.0 - labels[flip]
    dataset = PreferenceDataset()
    dataset.add(seg_0, seg_1, labels)
    return dataset


def agreement(model: RewardModel, seed: int = 5) -> float:
    """Share of fresh random pairs the model ranks as the true reward does."""
    rng = np.random.default_rng(seed)
    seg_0, seg_1 = make_segments(rng, 400), make_segments(rng, 400)
    true = seg_1.rewards.sum(-1) > seg_0.rewards.sum(-1)
    features = [np.concatenate([s.obs, s.actions], -1).astype(np.float32) for s in (seg_0, seg_1)]
    predicted = model.member_returns(features[1]).mean(0) > model.member_returns(features[0]).mean(0)
    return float(np.mean(predicted == true))


def test_without_seams_the_trainer_is_the_models_training():
    model_a, model_b = (RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL) for _ in range(2))
    data = labelled(60, np.zeros(60, dtype=bool))
    stats_a = RewardTrainer(model_a).fit(data, np.random.default_rng(3), max_epochs=5, schedule="bpref")
    stats_b = RewardTrainer(model_b, loss_terms=(), label_filter=None).fit(
        data, np.random.default_rng(3), max_epochs=5, schedule="bpref"
    )
    assert stats_a == stats_b and model_a.n_updates == model_b.n_updates > 0
    for a, b in zip(model_a.ensemble.parameters(), model_b.ensemble.parameters()):
        assert th.equal(a, b)


def test_a_label_filter_that_drops_the_wrong_labels_learns_the_true_reward():
    n = 200
    flip = np.random.default_rng(1).random(n) < 0.4  # 40% of the labels point the wrong way
    data = labelled(n, flip)
    kept = th.as_tensor(np.flatnonzero(~flip))

    def drop_flipped(trainer, tensors):
        assert len(tensors[2]) == n  # the filter sees every labelled pair
        return tuple(tensor[kept] for tensor in tensors)

    noisy, filtered = (RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL) for _ in range(2))
    RewardTrainer(noisy).fit(data, np.random.default_rng(0), max_epochs=30, schedule="bpref")
    stats = RewardTrainer(filtered, label_filter=drop_flipped).fit(
        data, np.random.default_rng(0), max_epochs=30, schedule="bpref"
    )
    # B-Pref's passes over the kept pairs only: ceil(kept / 128) steps per pass
    assert filtered.n_updates == stats["epochs"] * np.ceil(len(kept) / filtered.train_batch_size)
    assert agreement(filtered) > 0.85 and agreement(filtered) > agreement(noisy) + 0.05, (
        agreement(filtered),
        agreement(noisy),
    )

    # a filter that keeps nothing trains nothing
    empty = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    none = RewardTrainer(empty, label_filter=lambda trainer, tensors: tuple(t[:0] for t in tensors)).fit(
        data, np.random.default_rng(0)
    )
    assert none["steps"] == 0 and empty.n_updates == 0


def test_a_loss_term_adds_to_the_loss_and_its_gradient_moves_the_weights():
    data = labelled(64, np.zeros(64, dtype=bool))
    plain, constant, decayed = (RewardModel(OBS_DIM, ACT_DIM, seed=0, train_batch_size=64, **SMALL) for _ in range(3))

    def plus_two(trainer, seg_0, seg_1, labels):
        return th.tensor(2.0)

    def weight_decay(trainer, seg_0, seg_1, labels):
        return 1.0 * sum((p**2).sum() for p in trainer.model.ensemble.parameters())

    loss = RewardTrainer(plain).fit_epoch(data, np.random.default_rng(0))["loss"]
    # one minibatch: the reported loss is the Bradley-Terry loss plus the term; a constant has no gradient
    assert RewardTrainer(constant, loss_terms=[plus_two]).fit_epoch(data, np.random.default_rng(0))["loss"] == pytest.approx(
        loss + 2.0, rel=1e-6
    )
    for a, b in zip(plain.ensemble.parameters(), constant.ensemble.parameters()):
        assert th.equal(a, b)
    # a penalty on the weights' size shrinks them against the plain step
    trainer = RewardTrainer(decayed, loss_terms=[weight_decay])
    for _ in range(20):
        trainer.fit_epoch(data, np.random.default_rng(0))
        RewardTrainer(plain).fit_epoch(data, np.random.default_rng(0))
    norm = lambda model: float(sum((p.detach() ** 2).sum() for p in model.ensemble.parameters()))  # noqa: E731
    assert norm(decayed) < 0.8 * norm(plain), (norm(decayed), norm(plain))


def test_the_learner_trains_through_its_trainer_and_refuses_another_models():
    from sb3_pref.core.learner import PreferenceLearner

    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, mb_size=20, **SMALL)
    learner = PreferenceLearner(model, n_envs=1, teacher=ScriptedTeacher(seed=0), max_feed=40, seed=0)
    calls = []

    def counting(trainer, seg_0, seg_1, labels):
        calls.append(len(labels))
        return th.zeros(())

    learner.trainer = RewardTrainer(model, loss_terms=[counting])
    rng = np.random.default_rng(0)
    features = rng.normal(size=(300, 1, OBS_DIM + ACT_DIM)).astype(np.float32)
    dones = np.zeros((300, 1), dtype=bool)
    dones[99::100] = True
    learner.add_transitions(features[..., :OBS_DIM], features[..., OBS_DIM:], np.tanh(features @ TRUE_WEIGHTS), dones)
    learner.query_round()
    assert calls and len(learner.dataset) == 20
    with pytest.raises(ValueError, match="RewardTrainer of this learner's reward_model"):
        learner.trainer = RewardTrainer(RewardModel(OBS_DIM, ACT_DIM, seed=1, **SMALL))
