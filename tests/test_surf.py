"""SURF's semi-supervised reward learning (issue 44): pseudo-labels, temporal crops, and what they do to the reward."""

import gymnasium as gym
import numpy as np
import pytest
import smooth_task
import torch as th
from torch.nn import functional as F

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.core.surf import SURFLoss
from sb3_pref.experiments.flags import build_parser


def test_a_crop_is_one_contiguous_piece_per_segment_of_one_length_per_pair():
    surf = SURFLoss(crop=5, seed=0)
    steps = th.arange(20, dtype=th.float32)
    seg = steps[None, None, :, None].expand(3, 64, 20, 2).clone()  # (E, B, H, D), feature = the step index
    lengths, starts = set(), set()
    for _ in range(30):
        crop_0, crop_1 = surf.temporal_crop(seg, seg + 100)
        assert crop_0.shape == crop_1.shape and crop_0.shape[:2] == (3, 64) and crop_0.shape[-1] == 2
        length = crop_0.shape[2]
        lengths.add(length)
        assert 15 <= length <= 20
        first = crop_0[..., 0, 0]
        # Consecutive steps from each segment's own start, the same in every feature.
        run = th.arange(length, dtype=th.float32)
        assert th.equal(crop_0[..., 0], first[..., None] + run) and th.equal(crop_0[..., 1], crop_0[..., 0])
        assert th.equal(crop_1[..., 0], crop_1[..., :1, 0] + run) and crop_1.min() >= 100
        starts.update(first.unique().tolist())
        if length < 20:
            assert not th.equal(crop_0[..., 0, 0], crop_1[..., 0, 0] - 100)  # independent starts
    assert lengths == set(range(15, 21)) and starts == set(map(float, range(6)))


def linear_model_and_pairs(seed: int = 0, n: int = 64):
    model = RewardModel(3, 1, size_segment=10, ensemble_size=3, seed=seed)
    features = th.as_tensor(np.random.default_rng(seed).normal(size=(2, n, 10, 4)), dtype=th.float32)
    return model, features[0], features[1]


def test_the_loss_is_the_members_own_confident_answers_cross_entropy():
    model, pool_0, pool_1 = linear_model_and_pairs()
    trainer = RewardTrainer(model)
    surf = SURFLoss(tau=0.6, lam=0.5, mu=2, crop=0, seed=1)
    surf.set_pool(pool_0.numpy(), pool_1.numpy(), model.device)
    batch = th.zeros(3, 8, 10, 4)  # a labelled minibatch of 8 pairs per member: 16 unlabelled pairs each
    loss = surf(trainer, batch, batch, th.zeros(3, 8))
    # The same draw by hand: the member's own probabilities, its confident pairs, their cross-entropy.
    index = th.as_tensor(np.random.default_rng(1).integers(64, size=(3, 16)))
    with th.no_grad():
        logits = trainer.member_logits(pool_0[index], pool_1[index])
        probabilities = F.softmax(logits, dim=-1)
        mask = (probabilities.max(-1).values >= 0.6).float()
        expected = -th.log(probabilities.max(-1).values)
    assert 0 < mask.mean() < 1  # some pairs confident, some not: the mask matters here
    assert loss.item() == pytest.approx(0.5 * float((expected * mask).mean(-1).sum()), rel=1e-5)
    assert surf.stats["surf_confident"] == pytest.approx(float(mask.mean()))
    assert "surf_pseudo_agreement" not in surf.stats  # no true returns given: nothing measured
    # Nothing confident enough: no loss and no gradient
    never = SURFLoss(tau=1.0, crop=0, seed=1)
    never.set_pool(pool_0.numpy(), pool_1.numpy(), model.device)
    assert never(trainer, batch, batch, th.zeros(3, 8)).item() == 0.0


def test_the_diagnostic_counts_confident_pseudo_labels_that_rank_as_the_true_returns_do():
    model, pool_0, pool_1 = linear_model_and_pairs()
    trainer = RewardTrainer(model)
    true = np.random.default_rng(5).normal(size=(2, 64))
    true[1, :8] = true[0, :8]  # eight ties, left out
    surf = SURFLoss(tau=0.6, mu=2, crop=0, seed=1)
    surf.set_pool(pool_0.numpy(), pool_1.numpy(), model.device, true_returns=(true[0], true[1]))
    batch = th.zeros(3, 8, 10, 4)
    before = [p.detach().clone() for p in model.ensemble.parameters()]
    loss = surf(trainer, batch, batch, th.zeros(3, 8))
    index = np.random.default_rng(1).integers(64, size=(3, 16))
    with th.no_grad():
        probabilities = F.softmax(trainer.member_logits(pool_0[th.as_tensor(index)], pool_1[th.as_tensor(index)]), -1)
    confident, pseudo = (probabilities.max(-1).values >= 0.6).numpy(), probabilities.argmax(-1).numpy()
    better, tie = true[1, index] > true[0, index], true[1, index] == true[0, index]
    judged = confident & ~tie
    assert judged.sum() >= 10 and (confident & tie).any()  # ties among the confident ones are left out
    expected = float((pseudo[judged] == better[judged]).mean())
    assert surf.stats["surf_pseudo_agreement"] == pytest.approx(expected)
    # The same pool with the true returns swapped: every judged pseudo-label changes side
    swapped = SURFLoss(tau=0.6, mu=2, crop=0, seed=1)
    swapped.set_pool(pool_0.numpy(), pool_1.numpy(), model.device, true_returns=(true[1], true[0]))
    swapped_loss = swapped(trainer, batch, batch, th.zeros(3, 8))
    assert swapped.stats["surf_pseudo_agreement"] == pytest.approx(1 - expected)
    # A diagnostic only: the loss is the same with or without the true returns, and nothing was trained
    assert swapped_loss.item() == pytest.approx(loss.item())
    assert all(th.equal(p, q) for p, q in zip(before, model.ensemble.parameters()))


def learned_agreement(surf: bool, seed: int) -> float:
    """16 labels of a smooth task, 100 reward passes: the learned reward's agreement with the true one."""
    agreement, stats = smooth_task.learned_agreement(seed, surf=surf)
    assert ("surf_confident" in stats) == surf
    return agreement


def test_pseudo_labels_help_the_reward_where_labels_are_few():
    """Measured on seeds 0-5: 0.808 with SURF against 0.801 without (5 of 6 seeds higher); pseudo-labels
    flipped (a wrong implementation) drop it to 0.685, so the bound below separates right from wrong."""
    plain = [learned_agreement(False, seed) for seed in range(4)]
    surf = [learned_agreement(True, seed) for seed in range(4)]
    assert np.mean(surf) >= np.mean(plain) - 0.005, (surf, plain)
    assert sum(s > p for s, p in zip(surf, plain)) >= 2


def test_ppo_reward_with_surf_logs_the_confident_share_and_resumes_its_generator(tmp_path):
    env = gym.make("Pendulum-v1")
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, reward_model=reward_model, teacher="oracle",
        max_feed=40, num_interaction=64, unsuper_step=0, unsuper_flag=0, surf=True, seed=0, device="cpu",
    )  # fmt: skip
    model.learn(256)
    learner = model.pref_learner
    assert learner.surf is not None and learner.trainer.loss_terms == [learner.surf]
    assert 0 <= learner.surf.stats["surf_confident"] <= 1 and learner.surf.pool[0].shape == (1000, 10, 4)
    # the pool's true returns reached the diagnostic (Pendulum's returns never tie)
    assert learner.surf.true_better.shape == (1000,) and 0 <= learner.surf.stats["surf_pseudo_agreement"] <= 1
    model.save(tmp_path / "surf")
    loaded = PPO_REWARD.load(tmp_path / "surf", env=env)
    assert loaded.surf is True
    assert loaded.pref_learner.surf.rng.bit_generator.state == learner.surf.rng.bit_generator.state
    plain = PPO_REWARD("MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space))
    assert plain.pref_learner.surf is None and plain.pref_learner.trainer.loss_terms == []


def test_bad_settings_name_the_argument():
    with pytest.raises(ValueError, match=r"tau must be in \[0.5, 1\]"):
        SURFLoss(tau=0.3)
    with pytest.raises(ValueError, match="mu must be >= 1"):
        SURFLoss(mu=0)
    with pytest.raises(ValueError, match="the pool needs two"):
        SURFLoss().set_pool(np.zeros((3, 5, 2)), np.zeros((4, 5, 2)), th.device("cpu"))
    assert build_parser("x").parse_args(["--surf", "1"]).surf is True
