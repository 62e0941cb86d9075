"""The source learners of Algorithm Distillation: SB3's DQN on a table of cells (``record_learner(..., "dqn")``)."""

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env

from sb3_pref.ad import DQN_TABULAR_SETTINGS, CellsExtractor, make_dqn_learner, record_learner
from sb3_pref.envs.darkroom import DarkRoom

ROOM = dict(size=5, episode_length=8, terminate_on_goal=True)


def test_cells_extractor_turns_xy_into_the_cell_and_keeps_one_hot_cells():
    room = DarkRoom(goals=[(0, 0)], **ROOM)
    extractor = CellsExtractor(room.observation_space, size=5)
    xy = th.tensor([[0.0, 0.0], [0.5, 0.5], [1.0, 0.25], [0.75, 1.0]])  # cells (0, 0), (2, 2), (4, 1), (3, 4)
    cells = extractor(xy)
    assert cells.shape == (4, 25) and th.equal(cells.sum(dim=1), th.ones(4))
    assert cells.argmax(dim=1).tolist() == [0, 12, 21, 19]
    onehot = DarkRoom(goals=[(0, 0)], observation="onehot", **ROOM).observation_space
    same = th.eye(25)[:3]
    assert th.equal(CellsExtractor(onehot, size=5)(same), same)
    with pytest.raises(ValueError, match="49 one-hot cells, got 25 inputs"):
        CellsExtractor(onehot, size=7)


def test_dqn_learner_step_is_a_q_learning_update():
    # Each env step must move only the value just tried, half way to reward + 0.9 * the next cell's best value (0 at
    # the goal), from the table as it was before the step: replayed batches or a stale target would break this.
    room = dict(goals=[(1, 0)], **ROOM)
    venv = make_vec_env(DarkRoom, n_envs=1, seed=0, env_kwargs=room)
    model = make_dqn_learner(venv, seed=3)
    table = model.q_net.q_net[0].weight  # (actions, cells)
    extract = model.q_net.features_extractor
    moved, rewarded = 0, 0
    for step in range(60):
        before = table.detach().clone()
        model.learn(1, reset_num_timesteps=step == 0)
        buffer = model.replay_buffer
        cell = int(extract(th.as_tensor(buffer.observations[0])).argmax())
        next_cell = int(extract(th.as_tensor(buffer.next_observations[0])).argmax())
        action, reward = int(buffer.actions[0, 0, 0]), float(buffer.rewards[0, 0])
        done = float(buffer.dones[0, 0] * (1 - buffer.timeouts[0, 0]))  # a time limit is not the goal: it bootstraps
        target = reward + 0.9 * (1.0 - done) * float(before[:, next_cell].max())
        expected = before.clone()
        expected[action, cell] += 0.5 * (target - before[action, cell])
        assert th.allclose(table.detach(), expected, atol=1e-6), f"step {step}"
        moved += int(abs(target - float(before[action, cell])) > 1e-3)
        rewarded += int(reward > 0)
    assert moved >= 50 and rewarded >= 1  # the check saw real updates, the goal's included


def test_dqn_learner_starts_optimistic_and_learns_the_room():
    venv = make_vec_env(DarkRoom, n_envs=1, seed=0, env_kwargs=dict(goals=[(0, 0)], **ROOM))
    model = make_dqn_learner(venv, seed=0)
    assert model.learning_rate == DQN_TABULAR_SETTINGS["learning_rate"] == 0.5 and model.gamma == 0.9
    obs = th.as_tensor(venv.reset(), dtype=th.float32)
    values = model.q_net(obs)
    assert th.equal(values, model.q_net_target(obs)) and not model.q_net.q_net[0].bias.requires_grad
    # every action of every cell starts at the goal's value, raised by less than a step of learning to break ties
    assert ((values >= 1.0) & (values < 1.01)).all() and len(th.unique(values)) == 5
    first_choices = {int(make_dqn_learner(venv, seed=s).q_net(obs).argmax()) for s in range(20)}
    assert len(first_choices) >= 4  # untried actions in a random order: not always action 0 first
    # One learner on a goal 4 steps from the start: it finds the goal, then takes it nearly every episode.
    history = record_learner((0, 0), "dqn", 2500, seed=1, env_kwargs=ROOM, learner_kwargs=dict(learning_rate=0.4))
    assert history.meta["learner_kwargs"] == {**DQN_TABULAR_SETTINGS, "learning_rate": 0.4}  # the file says its learner
    returns = history.episode_returns()[0]
    assert set(np.unique(returns)) == {0.0, 1.0}  # the env's own reward
    assert returns[-50:].mean() >= 0.9
    room, rng, found = DarkRoom(goals=[(0, 0)], **ROOM), np.random.default_rng(0), []
    for episode in range(200):  # a random walk on the same room, for scale
        room.reset(seed=episode)
        for _ in range(8):
            _, reward, terminated, _, _ = room.step(int(rng.integers(5)))
            if terminated:
                break
        found.append(reward)
    assert np.mean(found) < 0.3  # 0.07 with this generator
