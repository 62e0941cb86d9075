import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from sb3_pref.core.preferences import PreferenceDataset
from sb3_pref.core.reward_model import BPREF_HIDDEN_DIM, BPREF_N_LAYERS, EnsembleLinear, RewardModel
from sb3_pref.core.reward_trainer import RewardTrainer
from sb3_pref.core.segments import SegmentBatch
from sb3_pref.core.teachers import ScriptedTeacher

OBS_DIM, ACT_DIM, HORIZON = 4, 2, 10
# True reward: tanh of a fixed linear map of concat(obs, action), per step.
TRUE_WEIGHTS = np.array([0.8, -0.5, 0.3, 0.0, 0.6, -0.4])
# A small, quick model for the recovery tests (the B-Pref default is 3 x 256).
SMALL = {"size_segment": HORIZON, "hidden_dim": 64, "n_layers": 1, "lr": 3e-3}


def make_segments(rng: np.random.Generator, n: int, horizon: int = HORIZON) -> SegmentBatch:
    features = rng.normal(size=(n, horizon, OBS_DIM + ACT_DIM)).astype(np.float32)
    return SegmentBatch(
        obs=features[..., :OBS_DIM],
        actions=features[..., OBS_DIM:],
        rewards=np.tanh(features @ TRUE_WEIGHTS).astype(np.float32),
        env_index=np.zeros(n, dtype=np.int64),
        start=np.zeros(n, dtype=np.int64),
    )


@pytest.fixture(scope="module")
def data() -> dict:
    """1000 labelled training pairs and 2000 held-out pairs, all labelled by an oracle teacher."""
    rng = np.random.default_rng(0)
    teacher = ScriptedTeacher.preset("oracle", seed=0)
    dataset = PreferenceDataset()
    seg_0, seg_1 = make_segments(rng, 1000), make_segments(rng, 1000)
    assert dataset.add(seg_0, seg_1, teacher.label_pairs(seg_0, seg_1)) == 1000
    test_0, test_1 = make_segments(rng, 2000), make_segments(rng, 2000)
    test_labels = teacher.label_pairs(test_0, test_1)
    # the held-out labels are balanced, so 50% is what a model without information scores
    assert 0.45 < test_labels.mean() < 0.55
    return {"dataset": dataset, "test": (test_0.features, test_1.features, test_labels)}


def weights_of(model: RewardModel) -> list:
    return [p.detach().clone() for p in model.ensemble.parameters()]


def assert_same_weights(model_a: RewardModel, model_b: RewardModel) -> None:
    for a, b in zip(model_a.ensemble.parameters(), model_b.ensemble.parameters()):
        assert th.equal(a, b)


def reference_member_rewards(model: RewardModel, rows: np.ndarray) -> np.ndarray:
    """Each member's forward pass done one member at a time, in float64: ``(E, n_rows)``."""
    linears = [m for m in model.ensemble if isinstance(m, EnsembleLinear)]
    out = []
    for member in range(model.ensemble_size):
        h = rows.astype(np.float64)
        for i, layer in enumerate(linears):
            h = h @ layer.weight[member].detach().double().numpy() + layer.bias[member, 0].detach().double().numpy()
            if i < len(linears) - 1:
                h = np.where(h > 0, h, 0.01 * h)  # LeakyReLU's default slope
        out.append(np.tanh(h[:, 0]))
    return np.stack(out)


# --------------------------------------------------------------------------------------- learning
@pytest.mark.parametrize("train_dtype", ["float32", "bfloat16"])
def test_recovers_a_known_reward_on_held_out_pairs(data, train_dtype):
    # bfloat16 mixed precision must learn as well: same epochs budget, same held-out bar
    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, train_dtype=train_dtype, **SMALL)
    untrained = model.preference_accuracy(*data["test"])
    assert abs(untrained - 0.5) < 0.15

    stats = RewardTrainer(model).fit(data["dataset"], np.random.default_rng(1), max_epochs=60, target_accuracy=0.97)
    held_out = model.preference_accuracy(*data["test"])
    assert stats["accuracy"] > 0.97 and stats["epochs"] < 60
    assert held_out >= 0.95, f"held-out preference accuracy {held_out:.4f}"
    # the learned reward itself tracks the true one, not just the pairs' order
    rows = np.random.default_rng(2).normal(size=(2000, OBS_DIM + ACT_DIM)).astype(np.float32)
    predicted, _ = model.predict(rows)
    assert np.corrcoef(predicted, np.tanh(rows @ TRUE_WEIGHTS))[0, 1] > 0.9


def test_preference_accuracy_ignores_equal_and_skipped_labels(data):
    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    features_0, features_1, labels = (array[:200] for array in data["test"])
    noisy = labels.copy()
    noisy[:50:2] = 0.5
    noisy[1:50:2] = np.nan
    keep = slice(50, None)
    expected = model.preference_accuracy(features_0[keep], features_1[keep], labels[keep])
    assert model.preference_accuracy(features_0, features_1, noisy) == expected
    returns_0, returns_1 = model.member_returns(features_0[keep]).mean(0), model.member_returns(features_1[keep]).mean(0)
    assert expected == np.mean((returns_1 > returns_0) == (labels[keep] == 1))
    assert np.isnan(model.preference_accuracy(features_0[:2], features_1[:2], np.array([0.5, np.nan])))


def test_offline_training_from_saved_npz_matches_in_memory(data, tmp_path):
    path = tmp_path / "prefs.npz"
    data["dataset"].save(path)
    loaded = PreferenceDataset.load(path)
    in_memory = RewardModel(OBS_DIM, ACT_DIM, seed=3, **SMALL)
    offline = RewardModel(OBS_DIM, ACT_DIM, seed=3, **SMALL)
    stats_a = RewardTrainer(in_memory).fit(data["dataset"], np.random.default_rng(9), max_epochs=60)
    stats_b = RewardTrainer(offline).fit(loaded, np.random.default_rng(9), max_epochs=60)
    assert stats_a == stats_b
    assert_same_weights(in_memory, offline)
    accuracy = offline.preference_accuracy(*data["test"])
    assert accuracy == in_memory.preference_accuracy(*data["test"])
    assert accuracy >= 0.95


# ------------------------------------------------------------------------------ Bradley-Terry loss
@pytest.mark.parametrize("margin", [0.0, 0.1])
def test_pair_loss_equals_hand_computed_cross_entropy(margin):
    # Two members with one hidden unit each: h = LeakyReLU(obs) = obs for obs > 0, r_e = tanh(a_e * h + c_e).
    # float32 pinned: the hand computation is exact only there ("auto" picks bfloat16 on CPUs with AVX512-BF16 / AMX)
    model = RewardModel(1, 1, ensemble_size=2, hidden_dim=1, n_layers=1, label_margin=margin, seed=0, train_dtype="float32")
    slope, offset = np.array([1.0, -2.0]), np.array([0.0, 0.3])
    hidden, output = model.ensemble[0], model.ensemble[2]
    with th.no_grad():
        hidden.weight.copy_(th.tensor([[[1.0], [0.0]], [[1.0], [0.0]]]))  # the action column is ignored
        hidden.bias.zero_()
        output.weight.copy_(th.tensor(slope, dtype=th.float32).view(2, 1, 1))
        output.bias.copy_(th.tensor(offset, dtype=th.float32).view(2, 1, 1))

    rng = np.random.default_rng(0)
    seg_0 = rng.uniform(0.1, 1.0, size=(2, 4, 3, 2))  # (E, B, H, D), different pairs per member
    seg_1 = rng.uniform(0.1, 1.0, size=(2, 4, 3, 2))
    labels = np.array([[0.0, 1.0, 0.5, 1.0], [1.0, 0.5, 0.0, 0.0]])

    def returns(seg: np.ndarray) -> np.ndarray:
        return np.tanh(slope[:, None, None] * seg[..., 0] + offset[:, None, None]).sum(-1)  # (E, B)

    r_0, r_1 = returns(seg_0), returns(seg_1)
    log_z = np.logaddexp(r_0, r_1)
    target_1 = labels * (1 - 2 * margin) + margin
    cross_entropy = -((1 - target_1) * (r_0 - log_z) + target_1 * (r_1 - log_z))
    expected = cross_entropy.mean(axis=1).sum()  # mean over pairs, summed over members

    loss, correct, counted = RewardTrainer(model).pair_loss(
        th.tensor(seg_0, dtype=th.float32), th.tensor(seg_1, dtype=th.float32), th.tensor(labels, dtype=th.float32)
    )
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    hard = labels != 0.5
    # B-Pref's count: every pair, an "equal" label scored as "the first segment" (argmax, ties to the first)
    assert int(counted) == labels.size == 8
    assert int(correct) == ((r_1 > r_0) == (labels == 1.0)).sum()
    assert int(correct) == ((r_1 > r_0) == (labels == 1.0))[hard].sum() + (r_1 <= r_0)[~hard].sum()
    # a wrong implementation of the soft target would differ by a clear amount
    assert abs(expected - cross_entropy[hard].sum() / 4) > 1e-2


def test_pair_loss_of_equal_label_is_log_two_for_equal_returns():
    model = RewardModel(2, 1, ensemble_size=3, hidden_dim=8, label_margin=0.2, seed=1)
    seg = th.randn(3, 5, 4, 3, generator=th.Generator().manual_seed(0))
    loss, correct, counted = RewardTrainer(model).pair_loss(seg, seg.clone(), th.full((3, 5), 0.5))
    assert loss.item() == pytest.approx(3 * np.log(2), rel=1e-6)
    # equal returns tie, and B-Pref's argmax breaks ties towards the first segment: all 15 count as right
    assert int(correct) == int(counted) == 15


def test_bfloat16_training_changes_the_forward_pass_at_bf16_resolution_only():
    generator = th.Generator().manual_seed(0)
    seg_0, seg_1 = th.randn(2, 3, 16, 50, OBS_DIM + ACT_DIM, generator=generator)
    labels = (th.rand(3, 16, generator=generator) > 0.5).float()
    fp32 = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=64, seed=0, train_dtype="float32")
    bf16 = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=64, seed=0, train_dtype="bfloat16")
    loss_32 = RewardTrainer(fp32).pair_loss(seg_0, seg_1, labels)[0]
    loss_16 = RewardTrainer(bf16).pair_loss(seg_0, seg_1, labels)[0]
    # bf16 keeps 8 bits of mantissa: the loss moves, but by far less than a percent; predictions stay exact
    assert loss_16.dtype == th.float32
    assert 1e-6 < abs(loss_16.item() - loss_32.item()) / loss_32.item() < 1e-2
    rows = seg_0[0, 0].numpy()
    np.testing.assert_array_equal(fp32.predict(rows)[0], bf16.predict(rows)[0])


# ------------------------------------------------------------------------------ training mechanics
def oracle_dataset(n_pairs: int, horizon: int, seed: int = 0, index_column: bool = False) -> PreferenceDataset:
    """Oracle-labelled random pairs; with ``index_column`` the first obs feature of ``seg_0`` is the pair's index."""
    rng = np.random.default_rng(seed)
    seg_0, seg_1 = make_segments(rng, n_pairs, horizon), make_segments(rng, n_pairs, horizon)
    if index_column:
        seg_0.obs[:, :, 0] = np.arange(n_pairs)[:, None]  # lets a spy tell which pairs a minibatch holds
    dataset = PreferenceDataset()
    dataset.add(seg_0, seg_1, ScriptedTeacher().label_pairs(seg_0, seg_1))
    return dataset


def test_each_member_sees_its_own_permutation(monkeypatch):
    model = RewardModel(OBS_DIM, ACT_DIM, size_segment=3, hidden_dim=8, train_batch_size=4, seed=0)
    seen = []
    trainer = RewardTrainer(model)
    original = trainer.pair_loss

    def spy(seg_0, seg_1, labels):
        seen.append(seg_0[:, :, 0, 0].round().long().numpy())  # (E, batch) pair indices
        return original(seg_0, seg_1, labels)

    monkeypatch.setattr(trainer, "pair_loss", spy)
    trainer.fit_epoch(oracle_dataset(10, 3, index_column=True), np.random.default_rng(5))
    assert [batch.shape for batch in seen] == [(3, 4), (3, 4), (3, 2)]
    order = np.concatenate(seen, axis=1)
    for member_order in order:
        np.testing.assert_array_equal(np.sort(member_order), np.arange(10))  # every pair exactly once
    assert len({tuple(member_order) for member_order in order}) == 3
    assert model.n_updates == 3


@pytest.mark.parametrize("batch_size, diverge", [(16, True), (64, False)])
def test_members_cloned_from_one_init_diverge_only_through_their_minibatches(batch_size, diverge):
    model = RewardModel(OBS_DIM, ACT_DIM, size_segment=HORIZON, hidden_dim=16, train_batch_size=batch_size, seed=0)
    with th.no_grad():
        for parameter in model.ensemble.parameters():
            parameter.copy_(parameter[:1].expand_as(parameter))
    RewardTrainer(model).fit_epoch(oracle_dataset(64, HORIZON), np.random.default_rng(0))
    probe = np.random.default_rng(1).normal(size=(100, OBS_DIM + ACT_DIM)).astype(np.float32)
    rewards = model.member_rewards(probe).numpy()
    spread = np.abs(rewards - rewards[0]).max()
    if diverge:
        assert spread > 1e-3
    else:
        # one full batch: the same data for every member, so only float rounding separates them
        assert spread < 1e-5


def record_epochs(monkeypatch, model: RewardModel, fail_at: int = 0) -> list:
    """Spy on the per-epoch pass: records (lr, accuracy) per epoch; raises on epoch ``fail_at`` if given."""
    records = []
    original = RewardTrainer.train_epoch

    def spy(trainer, tensors, rng, **kwargs):
        if trainer.model is not model:
            return original(trainer, tensors, rng, **kwargs)
        if len(records) + 1 == fail_at:
            raise RuntimeError("interrupted")
        stats = original(trainer, tensors, rng, **kwargs)
        records.append((model.optimizer.param_groups[0]["lr"], stats["accuracy"]))
        return stats

    # every trainer of this model (a trainer is made per call below)
    monkeypatch.setattr(RewardTrainer, "train_epoch", spy)
    return records


def test_train_stops_at_the_first_epoch_above_target(data, monkeypatch):
    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    records = record_epochs(monkeypatch, model)
    trainer = RewardTrainer(model)
    stats = trainer.fit(data["dataset"], np.random.default_rng(1), max_epochs=40, target_accuracy=0.9, schedule="bpref")
    accuracies = [accuracy for _, accuracy in records]
    assert 1 < stats["epochs"] == len(records) < 40
    assert accuracies[-1] == stats["accuracy"] > 0.9
    assert all(accuracy <= 0.9 for accuracy in accuracies[:-1])

    # "exceeds" is strict: 8 easy pairs are all ranked right within a few epochs, yet a target of 1.0 is never passed
    records.clear()
    stats = trainer.fit(oracle_dataset(8, 3), np.random.default_rng(1), max_epochs=30, target_accuracy=1.0, schedule="bpref")
    assert stats["epochs"] == len(records) == 30
    assert [accuracy for _, accuracy in records].count(1.0) > 20
    with pytest.raises(ValueError, match="max_epochs"):
        RewardTrainer(model).fit(data["dataset"], np.random.default_rng(1), max_epochs=0)
    with pytest.raises(ValueError, match="empty"):
        RewardTrainer(model).fit(PreferenceDataset(), np.random.default_rng(1))


def record_step_lrs(monkeypatch, model: RewardModel) -> list:
    """Spy on Adam's step: the learning rate of every gradient step."""
    lrs = []
    original = model.optimizer.step

    def spy(*args, **kwargs):
        lrs.append(model.optimizer.param_groups[0]["lr"])
        return original(*args, **kwargs)

    monkeypatch.setattr(model.optimizer, "step", spy)
    return lrs


@pytest.mark.parametrize("schedule", ["bpref", "auto"])
def test_anneal_lr_decays_per_step_to_zero_over_the_round_then_restores(data, monkeypatch, schedule):
    # 1000 pairs in minibatches of 128: 8 steps per pass; "bpref" with 4 passes takes 32 steps, "auto" its
    # budget of ceil(10 * 1000 / 128) = 79 steps, capped at 4 passes = 32 steps as well
    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    lrs = record_step_lrs(monkeypatch, model)
    # a target the first pass already passes: annealing runs the whole round regardless
    stats = RewardTrainer(model).fit(
        data["dataset"], np.random.default_rng(1), max_epochs=4, target_accuracy=0.0, anneal_lr=True, schedule=schedule
    )
    assert stats["steps"] == len(lrs) == 32 and stats["epochs"] == 4
    np.testing.assert_allclose(lrs, model.lr * (1.0 - np.arange(32) / 32))
    assert lrs[-1] == pytest.approx(model.lr / 32)  # ~0 at the round's last step
    assert model.optimizer.param_groups[0]["lr"] == model.lr == 3e-3

    # the next round starts from the full rate again; without annealing it stays there
    lrs.clear()
    RewardTrainer(model).fit(data["dataset"], np.random.default_rng(1), max_epochs=1, anneal_lr=True, schedule=schedule)
    np.testing.assert_allclose(lrs, model.lr * (1.0 - np.arange(8) / 8))
    lrs.clear()
    RewardTrainer(model).fit(data["dataset"], np.random.default_rng(1), max_epochs=2, target_accuracy=1.0, schedule=schedule)
    assert lrs == [model.lr] * 16

    # the rlhf preset: one pass, annealed to zero within it, over a pass that is not a whole number of minibatches
    lrs.clear()
    small = oracle_dataset(300, HORIZON)
    RewardTrainer(model).fit(small, np.random.default_rng(1), max_epochs=1, anneal_lr=True, schedule="bpref")
    np.testing.assert_allclose(lrs, model.lr * np.array([1.0, 2 / 3, 1 / 3]))

    # restored even when a round is interrupted
    interrupted = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    record_epochs(monkeypatch, interrupted, fail_at=3)
    with pytest.raises(RuntimeError, match="interrupted"):
        RewardTrainer(interrupted).fit(data["dataset"], np.random.default_rng(1), max_epochs=4, anneal_lr=True)
    assert interrupted.optimizer.param_groups[0]["lr"] == interrupted.lr


# ---------------------------------------------------------------------------------------- prediction
@pytest.mark.parametrize("batch_shape", [(7,), (5, 3), (4, 6)], ids=["N", "T-n_envs", "N-H"])
def test_batched_prediction_matches_per_member_computation(batch_shape):
    model = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=16, n_layers=2, seed=4)
    features = np.random.default_rng(0).normal(size=(*batch_shape, OBS_DIM + ACT_DIM)).astype(np.float32)
    mean, std = model.predict(features)
    assert mean.shape == std.shape == batch_shape
    assert mean.dtype == std.dtype == np.float32

    members = reference_member_rewards(model, features.reshape(-1, OBS_DIM + ACT_DIM))
    np.testing.assert_allclose(mean.reshape(-1), members.mean(0), atol=1e-6)
    np.testing.assert_allclose(std.reshape(-1), members.std(0), atol=1e-6)  # population std over members
    assert std.min() > 1e-3  # the members differ, so the std check is not vacuous

    np.testing.assert_allclose(
        model.member_rewards(features, chunk_size=4).numpy(), model.member_rewards(features).numpy(), atol=1e-6
    )
    np.testing.assert_array_equal(model.predict(th.from_numpy(features))[0], mean)
    # rows across the default chunks' boundaries (3 chunks) come back in order, as one pass gives them
    many = np.random.default_rng(1).normal(size=(10_000, OBS_DIM + ACT_DIM)).astype(np.float32)
    np.testing.assert_allclose(
        model.member_rewards(many).numpy(), model.member_rewards(many, chunk_size=len(many)).numpy(), rtol=1e-6, atol=1e-6
    )
    if len(batch_shape) == 2:
        np.testing.assert_allclose(
            model.member_returns(features), members.reshape(3, *batch_shape).sum(-1), rtol=1e-5, atol=1e-5
        )


@pytest.mark.parametrize("out_features", [1, 5], ids=["head", "hidden"])
@pytest.mark.parametrize("shared", [False, True], ids=["per-member", "shared-input"])
def test_ensemble_layer_and_its_gradients_are_each_members_own_linear_map(out_features, shared):
    """The reward head (one output) and a hidden layer are every member's own ``x @ W_m + b_m``, forward and backward,
    with no member's rows or weights leaking into another's: the guard for any faster formulation of the layers."""
    th.manual_seed(0)
    layer = EnsembleLinear(3, 4, out_features)
    x = th.randn(*(() if shared else (3,)), 11, 4, dtype=th.float32, requires_grad=True)
    upstream = th.randn(3, 11, out_features)
    (layer(x) * upstream).sum().backward()
    x64 = x.detach().double().requires_grad_(True)
    w64, b64 = (p.detach().double().requires_grad_(True) for p in (layer.weight, layer.bias))
    reference = th.stack([(x64 if shared else x64[m]) @ w64[m] + b64[m] for m in range(3)])
    (reference * upstream.double()).sum().backward()
    np.testing.assert_allclose(layer(x).detach().numpy(), reference.detach().numpy(), atol=1e-5)
    for got, want in ((x.grad, x64.grad), (layer.weight.grad, w64.grad), (layer.bias.grad, b64.grad)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


def test_discrete_and_dict_spaces_are_encoded():
    model = RewardModel(spaces.Box(-1, 1, shape=(3,)), spaces.Discrete(3), hidden_dim=8, seed=0)
    assert (model.obs_dim, model.act_dim, model.input_dim) == (3, 3, 6)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    actions = np.array([0, 2, 1, 1, 0])
    np.testing.assert_array_equal(
        model.predict_obs_action(obs, actions), model.predict(np.concatenate([obs, np.eye(3)[actions]], axis=1))[0]
    )

    obs_space = spaces.Dict({"vel": spaces.Box(-1, 1, shape=(2,)), "goal": spaces.Discrete(2)})
    dict_model = RewardModel(obs_space, spaces.Box(-1, 1, shape=(1,)), hidden_dim=8, seed=0)
    assert dict_model.obs_dim == 4
    batch = {"vel": obs[:, :2], "goal": np.array([1, 0, 0, 1, 1])}
    flat = np.concatenate([np.eye(2)[batch["goal"]], batch["vel"], obs[:, 2:]], axis=1)  # sorted keys: goal, vel
    np.testing.assert_array_equal(dict_model.predict_obs_action(batch, obs[:, 2:]), dict_model.predict(flat)[0])


def test_invalid_construction_and_inputs_raise():
    image = spaces.Box(0, 255, shape=(3, 32, 32), dtype=np.uint8)
    with pytest.raises(ValueError, match="observation_space"):
        RewardModel(image, spaces.Discrete(2))
    model = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=8)
    with pytest.raises(ValueError, match=r"obs_dim \+ act_dim = 4 \+ 2 = 6"):
        model.predict(np.zeros((3, 7), dtype=np.float32))
    with pytest.raises(ValueError, match="act_dim"):
        model.member_returns(np.zeros((2, 5, 5), dtype=np.float32))
    with pytest.raises(ValueError, match="activation='softplus'"):
        RewardModel(OBS_DIM, ACT_DIM, activation="softplus")
    for name, value in [
        ("size_segment", 0),
        ("mb_size", -1),
        ("large_batch", 2.5),
        ("ensemble_size", 0),
        ("hidden_dim", 0),
        ("train_batch_size", 0),
        ("n_layers", -1),
        ("lr", 0.0),
        ("label_margin", 0.5),
        ("train_dtype", "float16"),
    ]:
        with pytest.raises(ValueError, match=name):
            RewardModel(OBS_DIM, ACT_DIM, **{name: value})
    # zero hidden layers is allowed: a linear reward under the output activation
    assert len(RewardModel(OBS_DIM, ACT_DIM, n_layers=0).ensemble) == 2


# ------------------------------------------------------------------------ B-Pref call shape, seeding
def test_b_pref_call_shape_builds_the_teacher():
    model = RewardModel(
        17,
        6,
        size_segment=50,
        activation="tanh",
        lr=3e-4,
        mb_size=128,
        teacher_beta=-1,
        teacher_gamma=1,
        teacher_eps_mistake=0,
        teacher_eps_skip=0,
        teacher_eps_equal=0,
        large_batch=10,
        hidden_dim=BPREF_HIDDEN_DIM,
        n_layers=BPREF_N_LAYERS,
    )
    assert isinstance(model.teacher, ScriptedTeacher)
    teacher = model.teacher
    assert (teacher.beta, teacher.gamma, teacher.eps_mistake, teacher.eps_skip, teacher.eps_equal) == (-1, 1, 0, 0, 0)
    assert (model.size_segment, model.mb_size, model.large_batch, model.lr) == (50, 128, 10, 3e-4)
    # the B-Pref architecture: 3 members, 3 hidden layers of 256, tanh output
    shapes = [tuple(p.shape) for p in model.ensemble.parameters()]
    assert shapes[::2] == [(3, 23, 256), (3, 256, 256), (3, 256, 256), (3, 256, 1)]
    assert isinstance(model.ensemble[-1], th.nn.Tanh)

    noisy = RewardModel(
        17, 6, teacher_beta=2, teacher_gamma=0.9, teacher_eps_mistake=0.1, teacher_eps_skip=0.2, teacher_eps_equal=0.3
    )
    teacher = noisy.teacher
    assert (teacher.beta, teacher.gamma, teacher.eps_mistake, teacher.eps_skip, teacher.eps_equal) == (2, 0.9, 0.1, 0.2, 0.3)

    own = ScriptedTeacher.preset("mistake", seed=1)
    assert RewardModel(17, 6, teacher_beta=5, teacher=own).teacher is own


def test_same_seed_same_weights_without_touching_global_rng():
    th.manual_seed(0)
    model_a = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=16, seed=11)
    th.manual_seed(1)
    model_b = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=16, seed=11)
    assert_same_weights(model_a, model_b)
    other = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=16, seed=12)
    assert not th.equal(other.ensemble[0].weight, model_a.ensemble[0].weight)
    # the seed also seeds a teacher built from teacher_* arguments
    assert model_a.teacher.seed == 11

    initial = weights_of(model_a)
    trainer_a = RewardTrainer(model_a)
    trainer_a.fit(oracle_dataset(8, 3), np.random.default_rng(0), max_epochs=2, target_accuracy=1.0, schedule="bpref")
    assert model_a.n_updates == 2
    state = th.get_rng_state()
    model_a.reset_parameters(11)
    assert th.equal(th.get_rng_state(), state)
    assert all(th.equal(a, b) for a, b in zip(weights_of(model_a), initial))
    assert model_a.n_updates == 0 and len(model_a.optimizer.state) == 0

    # without a seed, weights come from (and advance) the global generator: every call draws anew
    model_a.reset_parameters()
    first = weights_of(model_a)
    model_a.reset_parameters()
    assert not th.equal(first[0], model_a.ensemble[0].weight)
    assert not th.equal(th.get_rng_state(), state)


# ------------------------------------------------------------------------------------- persistence
def test_save_load_round_trip(tmp_path):
    obs_space = spaces.Dict({"pos": spaces.Box(-1, 1, shape=(2,)), "mode": spaces.Discrete(3, start=1)})
    model = RewardModel(
        obs_space, spaces.Discrete(2), size_segment=3, hidden_dim=16, label_margin=0.05, train_dtype="bfloat16", seed=0
    )
    rng = np.random.default_rng(0)
    seg_0, seg_1 = (
        SegmentBatch(
            obs=rng.normal(size=(32, 3, 5)).astype(np.float32),
            actions=np.eye(2, dtype=np.float32)[rng.integers(2, size=(32, 3))],
            rewards=rng.normal(size=(32, 3)).astype(np.float32),
            env_index=np.zeros(32, dtype=np.int64),
            start=np.zeros(32, dtype=np.int64),
        )
        for _ in range(2)
    )
    dataset = PreferenceDataset()
    dataset.add(seg_0, seg_1, (seg_1.rewards.sum(1) > seg_0.rewards.sum(1)).astype(float))
    RewardTrainer(model).fit(dataset, np.random.default_rng(1), max_epochs=3, target_accuracy=1.0)

    path = tmp_path / "reward_model.pt"
    model.save(path)
    assert sorted(th.load(path, weights_only=True)) == ["config", "ensemble", "n_updates", "optimizer"]
    loaded = RewardModel.load(path)
    assert loaded.get_config() == model.get_config()
    assert loaded.n_updates == model.n_updates == 3
    assert_same_weights(model, loaded)
    obs = {"pos": rng.normal(size=(6, 2)), "mode": np.array([1, 2, 3, 1, 2, 3])}
    np.testing.assert_array_equal(
        loaded.predict_obs_action(obs, np.array([0, 1, 0, 1, 1, 0])),
        model.predict_obs_action(obs, np.array([0, 1, 0, 1, 1, 0])),
    )
    # Adam's moments came along: both continue identically
    RewardTrainer(model).fit(dataset, np.random.default_rng(2), max_epochs=2, target_accuracy=1.0)
    RewardTrainer(loaded).fit(dataset, np.random.default_rng(2), max_epochs=2, target_accuracy=1.0)
    assert_same_weights(model, loaded)
    teacher = ScriptedTeacher.preset("noisy")
    assert RewardModel.load(path, teacher=teacher).teacher is teacher


# ------------------------------------------------------------------------------- training schedules
def test_bpref_schedule_is_b_prefs_loop_bit_for_bit(data):
    # B-Pref's loop, written out: whole passes over all labels until one exceeds the target accuracy
    reference = RewardModel(OBS_DIM, ACT_DIM, seed=5, **SMALL)
    rng = np.random.default_rng(3)
    epoch, expected = 0, {"accuracy": 0.0}
    while epoch < 40 and expected["accuracy"] <= 0.97:
        expected = RewardTrainer(reference).fit_epoch(data["dataset"], rng)
        epoch += 1
    model = RewardModel(OBS_DIM, ACT_DIM, seed=5, **SMALL)
    model_rng = np.random.default_rng(3)
    stats = RewardTrainer(model).fit(data["dataset"], model_rng, max_epochs=40, target_accuracy=0.97, schedule="bpref")
    assert 1 < epoch < 40  # the stop fired, so both the stop and the passes before it are compared
    assert stats == {**expected, "epochs": float(epoch), "steps": float(8 * epoch)}
    assert model.n_updates == reference.n_updates == 8 * epoch
    assert_same_weights(model, reference)
    # the generators were advanced alike (one permutation per member per pass)
    assert model_rng.bit_generator.state == rng.bit_generator.state


def test_held_out_folds_leave_each_member_one_fold():
    from sb3_pref.core.reward_training import N_FOLDS, held_out_folds

    # 1002 pairs: folds 0 and 1 hold 101 pairs, fold 2 holds 100; rows are cut to the shortest
    train, val = held_out_folds(1002, 3, th.device("cpu"))
    assert train.shape == (3, 901) and val.shape == (3, 100)
    for member in range(3):
        fold = set(range(member, 1002, N_FOLDS))
        assert set(val[member].tolist()) <= fold  # scored on its own fold only
        assert not set(train[member].tolist()) & fold  # and never trains on it
        assert len(set(train[member].tolist())) == 901
    # every pair is trained on, and by at least ensemble_size - 1 members but for the cut rows' ends
    counts = np.bincount(train.flatten().numpy(), minlength=1002)
    assert counts.min() >= 1 and np.sum(counts < 2) <= 2


def test_auto_schedule_stops_on_held_out_loss_as_good_as_bpref(data, monkeypatch):
    test = data["test"]
    auto = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    records = record_epochs(monkeypatch, auto)
    stats = RewardTrainer(auto).fit(data["dataset"], np.random.default_rng(0), max_epochs=100, n_new=1000)
    # a cold start learns until the held-out loss stalls, well before the cap
    assert 10 < stats["epochs"] == len(records) < 100
    assert stats["steps"] == 8 * stats["epochs"] == auto.n_updates  # 900 training pairs per member: 8 steps a pass
    assert stats["held_out_accuracy"] > 0.9
    bpref = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    RewardTrainer(bpref).fit(data["dataset"], np.random.default_rng(0), max_epochs=100, schedule="bpref")
    auto_accuracy, bpref_accuracy = auto.preference_accuracy(*test), bpref.preference_accuracy(*test)
    assert bpref_accuracy > 0.9 and auto_accuracy > bpref_accuracy - 0.02

    # warm-started with nothing new to learn: stops after the patience (3 passes here), not the cap
    warm = RewardTrainer(auto).fit(data["dataset"], np.random.default_rng(1), max_epochs=100, n_new=0)
    assert warm["epochs"] <= 10
    # the new-label floor: 50 passes' worth of steps over 100 new labels = ceil(5000 / 128) = 40 steps at least
    floor = RewardTrainer(auto).fit(data["dataset"], np.random.default_rng(2), n_new=100, passes_per_new_label=50)
    assert floor["steps"] >= 40
    with pytest.raises(ValueError, match="schedule='fast'"):
        RewardTrainer(auto).fit(data["dataset"], np.random.default_rng(0), schedule="fast")
    with pytest.raises(ValueError, match="passes_per_new_label"):
        RewardTrainer(auto).fit(data["dataset"], np.random.default_rng(0), passes_per_new_label=0)


def test_auto_schedule_keeps_each_members_best_held_out_weights(data):
    # a learning rate that wrecks the model at every step: no pass beats the warm start on held-out labels,
    # so every member goes back to exactly the weights it started the round with
    trained = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    RewardTrainer(trained).fit(data["dataset"], np.random.default_rng(0), max_epochs=20, schedule="bpref")
    wrecked = RewardModel(OBS_DIM, ACT_DIM, seed=0, **{**SMALL, "lr": 10.0})
    wrecked.ensemble.load_state_dict(trained.ensemble.state_dict())
    stats = RewardTrainer(wrecked).fit(data["dataset"], np.random.default_rng(0), max_epochs=50, n_new=0)
    assert stats["epochs"] == 3 and wrecked.n_updates == 24  # the patience: 3 passes without improvement
    assert_same_weights(wrecked, trained)
    # tiny datasets (fewer than 3 pairs per fold) have nothing to hold out: B-Pref's round
    tiny = oracle_dataset(20, HORIZON)
    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, **SMALL)
    assert RewardTrainer(model).fit(tiny, np.random.default_rng(0), max_epochs=7, target_accuracy=1.0)["epochs"] == 7


def test_all_equal_round_stops_after_one_pass_as_in_b_pref(monkeypatch):
    # Pairs of identical segments, all labelled "equal": the returns tie, which B-Pref's argmax scores as
    # right, so the accuracy is 1 and the round stops after its first pass (it used to run all of them)
    rng = np.random.default_rng(0)
    seg = make_segments(rng, 40)
    dataset = PreferenceDataset()
    dataset.add(seg, seg, np.full(40, 0.5))
    # float32 pinned: the accuracy below must match member_returns' float32 pass exactly
    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, train_dtype="float32", **SMALL)
    stats = RewardTrainer(model).fit(dataset, np.random.default_rng(0), max_epochs=50, schedule="bpref")
    assert stats["epochs"] == 1 and stats["accuracy"] == 1.0

    # equal pairs of different segments count as right exactly where the first return is not lower
    other = make_segments(rng, 40)
    mixed = PreferenceDataset()
    mixed.add(seg, other, np.full(40, 0.5))
    first_not_lower = np.mean(model.member_returns(seg.features) >= model.member_returns(other.features))
    assert 0.0 < first_not_lower < 1.0
    frozen_lr = RewardModel(OBS_DIM, ACT_DIM, seed=0, train_dtype="float32", **{**SMALL, "lr": 1e-12})
    frozen_lr.ensemble.load_state_dict(model.ensemble.state_dict())
    frozen = RewardTrainer(frozen_lr)
    assert frozen.fit_epoch(mixed, np.random.default_rng(0))["accuracy"] == pytest.approx(first_not_lower, abs=1e-6)


def test_train_dtype_auto_follows_the_hardware(monkeypatch):
    from sb3_pref.core import reward_training

    model = RewardModel(OBS_DIM, ACT_DIM, hidden_dim=8, device="cpu")
    # this machine's choice follows its flags: bf16 is emulated (measured 4x slower) on CPUs without AMX /
    # AVX512-BF16, and 3.8-4.5x faster on an EPYC with AVX512-BF16 (benchmarks/overhead/bf16_cpu.md)
    assert model.train_dtype == ("bfloat16" if reward_training.cpu_bf16_flags() else "float32")
    assert model.get_config()["train_dtype"] == "auto"  # a saved model chooses again where it is loaded
    for flags, expected in [((), "float32"), (("avx512_bf16",), "bfloat16"), (("amx_bf16",), "bfloat16")]:
        monkeypatch.setattr(reward_training, "cpu_bf16_flags", lambda flags=flags: flags)
        assert RewardModel(OBS_DIM, ACT_DIM, hidden_dim=8, device="cpu").train_dtype == expected, flags
    assert RewardModel(OBS_DIM, ACT_DIM, hidden_dim=8, device="cpu", train_dtype="float32").train_dtype == "float32"
    for supported, expected in [(True, "bfloat16"), (False, "float32")]:
        monkeypatch.setattr(th.cuda, "is_bf16_supported", lambda supported=supported: supported)
        assert reward_training.resolve_train_dtype("auto", th.device("cuda")) == expected
    assert reward_training.resolve_device("auto") == th.device("cuda" if th.cuda.is_available() else "cpu")
    assert RewardModel(OBS_DIM, ACT_DIM, hidden_dim=8).device == reward_training.resolve_device("auto")


def test_learner_trains_on_each_rounds_new_labels_and_checks_the_schedule():
    from sb3_pref.core.learner import PreferenceLearner

    model = RewardModel(OBS_DIM, ACT_DIM, seed=0, mb_size=64, **SMALL)
    learner = PreferenceLearner(model, n_envs=2, teacher=ScriptedTeacher.preset("oracle", seed=0), max_feed=256, seed=0)
    assert learner.schedule == "auto"
    rng = np.random.default_rng(0)
    features = rng.normal(size=(500, 2, OBS_DIM + ACT_DIM)).astype(np.float32)
    dones = np.zeros((500, 2), dtype=bool)
    dones[99::100] = True
    learner.add_transitions(features[..., :OBS_DIM], features[..., OBS_DIM:], np.tanh(features @ TRUE_WEIGHTS), dones)
    given_new = []
    original = learner.trainer.fit

    def spy(*args, **kwargs):
        given_new.append(kwargs["n_new"])
        return original(*args, **kwargs)

    learner.trainer.fit = spy
    steps, held_out = [], []
    for _ in range(3):
        stats = learner.query_round()
        steps.append((len(learner.dataset), stats["model_train_steps"], stats["model_train_epochs"]))
        held_out.append(stats["model_held_out_accuracy"])
    # each round hands the model its 64 new labels: at least ceil(10 * 64 / 128) = 5 steps, at most re_update passes
    assert given_new == [64, 64, 64]
    assert [n for n, _, _ in steps] == [64, 128, 192]
    assert all(s >= 5 and e <= 100 for _, s, e in steps)
    # the early-stop criterion is logged, and it is learnt: the members rank their held-out pairs well
    assert held_out[-1] > 0.8
    with pytest.raises(ValueError, match="reward_schedule='b-pref'"):
        PreferenceLearner(model, n_envs=2, schedule="b-pref")


def test_ppo_reward_defaults_to_auto_and_the_b_pref_scripts_to_bpref():
    from sb3_pref import PPO_REWARD
    from sb3_pref.experiments.flags import build_parser

    env = "Pendulum-v1"
    model = RewardModel(spaces.Box(-1, 1, (3,)), spaces.Box(-2, 2, (1,)), hidden_dim=8, seed=0)
    assert PPO_REWARD("MlpPolicy", env, reward_model=model, n_steps=64).pref_learner.schedule == "auto"
    built = PPO_REWARD("MlpPolicy", env, reward_model=model, n_steps=64, reward_schedule="bpref")
    assert built.pref_learner.schedule == "bpref"
    with pytest.raises(ValueError, match="reward_schedule='exact'"):
        PPO_REWARD("MlpPolicy", env, reward_model=model, reward_schedule="exact")
    # B-Pref's scripts and grids (examples/train_PrefPPO.py, the bpref presets) keep B-Pref's schedule
    assert build_parser("B-Pref").parse_args([]).re_schedule == "bpref"


@pytest.mark.parametrize("shape", [(7, 64, 2), (5, 256, 3)], ids=["defaults", "bpref"])
def test_ensemble_training_step_has_autograd_plain_bits(shape):
    """The network's faster backward (the head's input gradient as a broadcast product, the activations in place) gives
    the very bits of the plain layers under autograd (baddbmm, an out-of-place LeakyReLU): a training run's path
    depends on them, so a change that moved one bit would move every run (and the learning guard's screened seeds)."""
    from torch.nn import functional as F

    from sb3_pref.core.ensemble import build_ensemble

    input_dim, hidden, n_layers = shape
    th.manual_seed(0)
    net = build_ensemble(3, input_dim, hidden, n_layers, "tanh")
    params = [p.detach().clone().requires_grad_(True) for p in net.parameters()]
    x = th.randn(2 * 16 * 50, input_dim) * 3  # shared by the members, as the trainer passes it
    upstream = th.randn(3, 2 * 16 * 50, 1)

    (net(x) * upstream).sum().backward()
    out = x.expand(3, *x.shape)
    for i in range(0, len(params) - 2, 2):  # the reference: plain ops, nothing in place
        out = F.leaky_relu(th.baddbmm(params[i + 1], out, params[i]))
    reference = th.tanh(th.baddbmm(params[-1], out, params[-2]))
    (reference * upstream).sum().backward()
    assert th.equal(net(x), reference)
    for layer_param, plain in zip(net.parameters(), params):
        assert th.equal(layer_param.grad, plain.grad)
