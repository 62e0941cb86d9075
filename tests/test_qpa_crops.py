"""QPA's data augmentation (issue 44): each labelled pair counted many times, on crops of its segments."""

import gymnasium as gym
import numpy as np
import pytest
import smooth_task
import torch as th
from torch.nn import functional as F

from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel
from sb3_pref.core.qpa import PairCrops
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.experiments.flags import build_parser


def test_crops_are_one_contiguous_piece_per_segment_of_70_to_90_percent_one_length_per_pair():
    mask_0, mask_1 = PairCrops(20, seed=0).masks(64, 50)
    assert mask_0.shape == mask_1.shape == (20, 64, 50) and mask_0.dtype == th.float32
    for mask in (mask_0, mask_1):
        # one contiguous run of ones: at most one rise and one fall along the steps
        edges = mask.diff(dim=-1, prepend=th.zeros(20, 64, 1), append=th.zeros(20, 64, 1))
        assert ((edges == 1).sum(-1) == 1).all() and ((edges == -1).sum(-1) == 1).all()
    lengths = mask_0.sum(-1)
    assert th.equal(lengths, mask_1.sum(-1))  # QPA: one length for both segments of a pair
    assert set(lengths.unique().tolist()) == set(map(float, range(35, 46)))  # QPA's 35-45 of 50 steps, all of them
    starts_0, starts_1 = mask_0.argmax(-1), mask_1.argmax(-1)
    assert starts_0.min() == 0 and (starts_0 + lengths).max() == 50  # crops reach both ends of the segment
    # independent starts: equal by chance only (about 1 in 10 for lengths 35-45)
    assert 0.03 < (starts_0 == starts_1).float().mean() < 0.2
    assert PairCrops(20).lengths(8) == (6, 7) and PairCrops(3, shortest=0.1, longest=0.1).lengths(4) == (1, 1)


def test_the_loss_is_the_mean_cross_entropy_of_every_cropped_view_against_its_pairs_label():
    # float32 pinned: "auto" trains in bfloat16 on a CPU with AVX512-BF16, and the by-hand sum below is float32
    model = RewardModel(3, 1, size_segment=12, ensemble_size=3, seed=0, train_dtype="float32")
    generator = th.Generator().manual_seed(0)
    seg_0, seg_1 = th.randn(2, 3, 8, 12, 4, generator=generator)  # (E, B, H, D) each
    labels = th.tensor([0.0, 1.0, 1.0, 0.0, 0.5, 1.0, 0.0, 1.0]).expand(3, 8)
    loss, correct, counted = RewardTrainer(model, augment=PairCrops(5, seed=7)).pair_loss(seg_0, seg_1, labels)
    # By hand, view by view: the same masks, each view's return a masked sum of the member's step rewards.
    mask_0, mask_1 = PairCrops(5, seed=7).masks(8, 12)
    with th.no_grad():
        step_0 = model.ensemble(seg_0.reshape(3, -1, 4)).reshape(3, 8, 12)
        step_1 = model.ensemble(seg_1.reshape(3, -1, 4)).reshape(3, 8, 12)
    expected, right = th.zeros(3), 0
    for c in range(5):
        for b in range(8):
            logits = th.stack([(step_0[:, b] * mask_0[c, b]).sum(-1), (step_1[:, b] * mask_1[c, b]).sum(-1)], -1)
            target = th.stack([1 - labels[:, b], labels[:, b]], -1)
            expected += -(target * F.log_softmax(logits, -1)).sum(-1) / 40
            right += int(((logits[:, 1] > logits[:, 0]) == (labels[:, b] > 0.5)).sum())
    assert loss.item() == pytest.approx(float(expected.sum()), rel=1e-5)
    assert int(counted) == 3 * 40 and int(correct) == right
    # whole pairs (no augment) are not the same loss: the crops matter
    plain, _, plain_counted = RewardTrainer(model).pair_loss(seg_0, seg_1, labels)
    assert int(plain_counted) == 24 and abs(plain.item() - loss.item()) > 1e-3


def learned_agreement(crops: int, seed: int) -> float:
    """16 labels of a smooth task, 100 reward passes: the learned reward's agreement with the true one."""
    return smooth_task.learned_agreement(seed, qpa_crops=crops)[0]


def test_crops_keep_the_reward_as_right_as_whole_pairs_do():
    """Measured on seeds 0-5 (16 labels, segments of 20, crops of 14-18): 0.802 with 20 cropped copies against 0.801
    with whole pairs. The labels are the teacher's answers about whole segments; crops of 70-90% keep them true often
    enough that the reward is learned as well. Labels paired with the wrong views would not be."""
    plain = [learned_agreement(0, seed) for seed in range(3)]
    crops = [learned_agreement(20, seed) for seed in range(3)]
    assert min(crops) > 0.7 and np.mean(crops) >= np.mean(plain) - 0.01, (crops, plain)


@pytest.mark.parametrize("algorithm", [PPO_REWARD, SAC_REWARD])
def test_the_option_trains_on_crops_on_and_off_policy_and_resumes_its_generator(tmp_path, algorithm):
    env = gym.make("Pendulum-v1")
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, seed=0)
    settings = dict(n_steps=64, batch_size=32, n_epochs=1) if algorithm is PPO_REWARD else dict(learning_starts=64)
    model = algorithm(
        "MlpPolicy", env, reward_model=reward_model, teacher="oracle", max_feed=20, num_interaction=64, unsuper_step=0,
        unsuper_flag=0, qpa_crops=4, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]), **settings,
    )  # fmt: skip
    fresh = model.pref_learner.pair_crops.rng.bit_generator.state
    model.learn(192)
    learner = model.pref_learner
    assert learner.total_feed == 20 and learner.trainer.augment is learner.pair_crops
    assert learner.pair_crops.copies == 4 and learner.pair_crops.rng.bit_generator.state != fresh  # crops were drawn
    model.save(tmp_path / "crops")
    loaded = algorithm.load(tmp_path / "crops", env=env)
    assert loaded.qpa_crops == 4
    assert loaded.pref_learner.pair_crops.rng.bit_generator.state == learner.pair_crops.rng.bit_generator.state
    plain = algorithm("MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space))
    assert plain.pref_learner.pair_crops is None and plain.pref_learner.trainer.augment is None


def test_bad_settings_name_the_argument():
    with pytest.raises(ValueError, match="copies must be >= 1"):
        PairCrops(0)
    with pytest.raises(ValueError, match="0 < shortest <= longest <= 1"):
        PairCrops(20, shortest=0.9, longest=0.7)
    env = gym.make("Pendulum-v1")
    with pytest.raises(ValueError, match="qpa_crops"):
        PPO_REWARD("MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space), qpa_crops=-1)
    assert build_parser("x").parse_args(["--qpa-crops", "20"]).qpa_crops == 20


def test_the_successors_compose_on_one_trainer_and_resume_together(tmp_path):
    """RIME's filter, SURF's loss term, QPA's queries and crops and RUNE's bonus in one run: each in its seam."""
    env = gym.make("Pendulum-v1")
    reward_model = RewardModel(env.observation_space, env.action_space, size_segment=10, mb_size=10, seed=0)
    model = PPO_REWARD(
        "MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, reward_model=reward_model, teacher="oracle",
        max_feed=30, num_interaction=64, unsuper_step=0, unsuper_flag=0, rime=True, surf=True, qpa_episodes=2,
        qpa_crops=4, rune_beta=0.01, seed=0, device="cpu", policy_kwargs=dict(net_arch=[16]),
    )  # fmt: skip
    model.learn(256)
    learner = model.pref_learner
    trainer = learner.trainer
    assert trainer.label_filter is learner.label_filter is not None and trainer.loss_terms == [learner.surf]
    assert trainer.augment is learner.pair_crops and learner.total_feed == 30
    assert 0 < learner.label_filter.stats["rime_trusted"] <= 1 and 0 <= learner.surf.stats["surf_confident"] <= 1
    model.save(tmp_path / "all")
    loaded = PPO_REWARD.load(tmp_path / "all", env=env).pref_learner
    assert loaded.pair_crops.rng.bit_generator.state == learner.pair_crops.rng.bit_generator.state
    assert loaded.surf.rng.bit_generator.state == learner.surf.rng.bit_generator.state
    assert loaded.label_filter.state_dict() == learner.label_filter.state_dict()
    assert (loaded.qpa_episodes, loaded.rune_beta) == (2, 0.01)
