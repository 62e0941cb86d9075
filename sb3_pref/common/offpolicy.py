"""
The preference core on an SB3 off-policy algorithm (SAC): PEBBLE's replay-buffer side.

The same :class:`~sb3_pref.common.rollout.RolloutRecorder` and
:class:`~sb3_pref.common.learner.PreferenceLearner` serve both families; what differs is where the
rewards live. An off-policy ``collect_rollouts`` stores each transition in a replay buffer and calls
``on_rollout_end`` every ``train_freq`` steps; :class:`OffPolicyPreferenceMixin` then

- during pretraining, adds the rollout's raw observations to the k-NN set and, at train time,
  rewards each sampled batch with its state entropy against the whole set (as PEBBLE does, so the
  reward of old transitions shrinks as the set grows);
- after pretraining, writes the reward model's predictions for the new transitions into the replay
  buffer, and after every reward-model update relabels the **whole** buffer with
  :func:`relabel_replay_buffer` in bounded chunks.

The replay buffer already holds the raw (never VecNormalize-d) observations SB3 stores, and the
actions in the policy's [-1, 1] scale: both are re-encoded on the fly, so no extra memory is needed.
"""

from typing import TYPE_CHECKING, Any, Callable, Optional, Union, cast

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.vec_env import VecNormalize
from torch import nn

from sb3_pref.common.entropy import StateEntropyReward
from sb3_pref.common.learner import PreferenceLearner
from sb3_pref.common.options import OFF_POLICY, document_options, takes_options
from sb3_pref.common.rollout import PHASE_PRETRAIN, PHASE_TRUE_REWARD
from sb3_pref.common.sb3_glue import PreferenceAlgorithmMixin

if TYPE_CHECKING:
    # For type checkers only: the mixin runs inside an SB3 off-policy algorithm. At run time the base is object.
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm as _OffPolicyBase
else:
    _OffPolicyBase = object

Observation = Union[np.ndarray, dict[str, np.ndarray]]


def relabel_replay_buffer(
    buffer: ReplayBuffer,
    reward_fn: Callable[[Observation, np.ndarray], np.ndarray],
    chunk_size: int = 16384,
) -> int:
    """
    Overwrite the rewards of every stored transition, ``chunk_size`` transitions per call of ``reward_fn``.

    :param buffer: a ``ReplayBuffer`` or ``DictReplayBuffer`` (rewards laid out ``(buffer_size, n_envs)``)
    :param reward_fn: ``(raw observations (n, *obs_shape) or a dict of them, buffer actions (n, *act_shape))
        -> (n,)`` rewards
    :param chunk_size: transitions per batch; bounds the memory of one pass
    :return: the number of transitions relabelled
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    n_rows = buffer.buffer_size if buffer.full else buffer.pos
    n_envs = buffer.n_envs
    rows_per_chunk = max(1, chunk_size // n_envs)
    for begin in range(0, n_rows, rows_per_chunk):
        rows = slice(begin, min(begin + rows_per_chunk, n_rows))
        n = (rows.stop - rows.start) * n_envs
        if isinstance(buffer.observations, dict):
            obs: Observation = {key: value[rows].reshape(n, *value.shape[2:]) for key, value in buffer.observations.items()}
        else:
            obs = buffer.observations[rows].reshape(n, *buffer.observations.shape[2:])
        actions = buffer.actions[rows].reshape(n, *buffer.actions.shape[2:])
        buffer.rewards[rows] = np.asarray(reward_fn(obs, actions), dtype=np.float32).reshape(-1, n_envs)
    return n_rows * n_envs


def _to_numpy(value: Union[th.Tensor, dict[str, th.Tensor]]) -> Observation:
    if isinstance(value, dict):
        return {key: item.cpu().numpy() for key, item in value.items()}
    return value.cpu().numpy()


class _EntropyRewardSampler:
    """
    Stands in for the replay buffer inside ``train`` during pretraining: each sampled batch gets the
    state-entropy reward of its raw observations. Everything else is delegated to the buffer.
    """

    def __init__(self, buffer: ReplayBuffer, algorithm: "OffPolicyPreferenceMixin") -> None:
        self.buffer = buffer
        self.algorithm = algorithm
        self.rewards: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.buffer, name)

    def sample(self, batch_size: int, env: Optional[VecNormalize] = None) -> Any:
        # Raw samples: the k-NN reward must see raw observations, and VecNormalize's reward scale must not apply.
        data, rows = self._sample_raw(batch_size)
        algorithm = self.algorithm
        entropy = cast(StateEntropyReward, algorithm.entropy_reward)
        raw_obs = _to_numpy(data.observations)
        features = algorithm._reward_features(raw_obs)
        if rows is not None and rows.max() < entropy.size and np.array_equal(entropy.buffer[rows].cpu().numpy(), features):
            # The k-NN set holds the buffer's rows in the same order: look the distances up.
            intrinsic = entropy.score_rows(rows)
        else:
            intrinsic = entropy.score(features)
        self.rewards.append(float(intrinsic.mean()))
        if env is not None:
            device = data.rewards.device
            data = data._replace(
                observations=_normalized(env, raw_obs, device),
                next_observations=_normalized(env, _to_numpy(data.next_observations), device),
            )
        return data._replace(rewards=th.as_tensor(intrinsic, device=data.rewards.device).reshape(data.rewards.shape))

    def _sample_raw(self, batch_size: int) -> tuple[Any, Optional[np.ndarray]]:
        """
        The buffer's own sample without normalisation, and the rows it drew where they map onto the k-NN set's
        (one env, a plain ``ReplayBuffer``: transition ``i`` is the set's row ``i``), else None. SB3 draws the
        rows as always (a run samples the batches SAC would); they are read on their way to ``_get_samples``.
        """
        buffer = self.buffer
        if type(buffer) is not ReplayBuffer or buffer.optimize_memory_usage or buffer.n_envs != 1:
            return buffer.sample(batch_size, env=None), None
        drawn: list[np.ndarray] = []
        get_samples = buffer._get_samples

        def read_rows(batch_inds: np.ndarray, env: Optional[VecNormalize] = None) -> Any:
            drawn.append(batch_inds)
            return get_samples(batch_inds, env=env)

        buffer._get_samples = read_rows  # type: ignore[method-assign]  # this call only; the class's method is restored
        try:
            data = buffer.sample(batch_size, env=None)
        finally:
            del buffer._get_samples
        return data, drawn[0]


def _normalized(env: VecNormalize, obs: Observation, device: th.device) -> Union[th.Tensor, dict[str, th.Tensor]]:
    normalized = env.normalize_obs(obs)
    if isinstance(normalized, dict):
        return {key: th.as_tensor(value, device=device) for key, value in normalized.items()}
    return th.as_tensor(normalized, device=device)


@document_options(OFF_POLICY)
class OffPolicyPreferenceMixin(PreferenceAlgorithmMixin, _OffPolicyBase):
    """
    Preference-based reward learning for an SB3 off-policy algorithm with a replay buffer
    (``class SAC_REWARD(OffPolicyPreferenceMixin, SAC)``): B-Pref's PEBBLE flow.

    Pretraining covers the ``learning_starts`` seed steps plus ``unsuper_step`` steps (B-Pref's
    ``num_seed_steps + num_unsup_steps``). When it ends: a uniform query round, the whole buffer
    relabelled, the critic reset (:meth:`_reset_value_head`) and ``reset_update`` extra gradient
    steps. Without pretraining, the seed steps keep the env's reward (nothing trains on them) and
    the first round comes right after them.

    :param args: the algorithm's positional arguments
    :param kwargs: the algorithm's keyword arguments and the off-policy preference options:

    (then the preference options, declared in sb3_pref.common.options: see help() or the table of the API page)
    """

    # For type checkers: replay_buffer is swapped for an _EntropyRewardSampler during pretraining updates.
    replay_buffer: Any

    option_family = OFF_POLICY
    reset_update: int
    relabel_chunk_size: int

    @takes_options(OFF_POLICY)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._pending_reset_updates = 0
        # Which reward model state the buffer's rewards come from; None forces a full relabel (e.g. after load).
        self._relabelled_version: Optional[tuple] = None
        # PreferenceAlgorithmMixin takes the options, and refuses the on-policy ones (they act on a rollout).
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------------ phases
    def _pretraining(self) -> bool:
        return (
            self.unsuper_flag in (1, 2)
            and not self._pretrain_done
            and self._unsuper_steps_done < self.learning_starts + self.unsuper_step
        )

    def _begin_rollout(self) -> None:
        if not self._pretraining() and self.num_timesteps < self.learning_starts and not self._pretrain_done:
            # Seed steps without pretraining: random actions, no gradient step, so no reward to learn yet.
            self._rollout_phase = PHASE_TRUE_REWARD
            return
        super()._begin_rollout()

    def _pretrain_rollout(self, obs: np.ndarray, seen: np.ndarray) -> None:
        # PEBBLE scores a state against every stored state: the k-NN set is the pretraining part of the buffer.
        if self.entropy_reward is None:
            capacity = max(self.learning_starts + self.unsuper_step, seen.size)
            self.entropy_reward = StateEntropyReward(obs.shape[-1], capacity=capacity, k=self.entropy_k)
        self.entropy_reward.add(obs.reshape(seen.size, -1))

    def _reward_version(self) -> tuple:
        learner = cast(PreferenceLearner, self.pref_learner)  # relabelling happens only with a reward model
        return (learner.reward_model.n_updates, learner.reward_shift, learner.reward_scale)

    def _write_rewards(self, predicted: np.ndarray, seen: np.ndarray) -> None:
        if self._relabelled_version != self._reward_version():
            self.relabel_replay_buffer()
            return
        # The rollout's transitions are the newest rows of the buffer.
        buffer = self.replay_buffer
        rows = (buffer.pos - len(predicted) + np.arange(len(predicted))) % buffer.buffer_size
        buffer.rewards[rows] = predicted.astype(np.float32)

    def relabel_replay_buffer(self) -> int:
        """
        Rewrite every reward in the replay buffer with the current reward model, in batched passes.

        :return: the number of transitions relabelled
        """
        learner = cast(PreferenceLearner, self.pref_learner)

        def reward_fn(obs: Observation, buffer_actions: np.ndarray) -> np.ndarray:
            # The reward model saw env actions (what the recorder copies); the buffer holds them in [-1, 1].
            actions = self.policy.unscale_action(buffer_actions)
            return learner.predict_rewards(self._reward_features(obs), self._reward_actions(actions))

        n = relabel_replay_buffer(self.replay_buffer, reward_fn, chunk_size=self.relabel_chunk_size)
        self._relabelled_version = self._reward_version()
        self.logger.record("reward/relabelled", n)
        return n

    def _reset_value_head(self) -> None:
        """PEBBLE resets the critic (both Q-networks, their target copy and the critic's optimizer), not the actor or alpha."""
        policy: Any = self.policy  # a SACPolicy
        critic, target = policy.critic, policy.critic_target
        for module in (layer for q_net in critic.q_networks for layer in q_net.modules()):
            if isinstance(module, nn.Linear):
                module.reset_parameters()
        target.load_state_dict(critic.state_dict())
        critic.optimizer.state.clear()
        self._pending_reset_updates = self.reset_update

    # ---------------------------------------------------------------- training
    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        algorithm_train = super().train
        gradient_steps += self._pending_reset_updates
        self._pending_reset_updates = 0
        if self._rollout_phase != PHASE_PRETRAIN or self.entropy_reward is None:
            return algorithm_train(gradient_steps=gradient_steps, batch_size=batch_size)
        buffer, sampler = self.replay_buffer, _EntropyRewardSampler(self.replay_buffer, self)
        self.replay_buffer = sampler
        try:
            algorithm_train(gradient_steps=gradient_steps, batch_size=batch_size)
        finally:
            self.replay_buffer = buffer
        if sampler.rewards:
            self.logger.record("reward/entropy_reward_mean", float(np.mean(sampler.rewards)))

    def _check_reward_normalization(self) -> None:
        vec_normalize = self.get_vec_normalize_env()
        if self.reward_model is not None and vec_normalize is not None and vec_normalize.norm_reward:
            raise ValueError(
                "VecNormalize(norm_reward=True) would rescale the learned reward by the true reward's statistics "
                "when the replay buffer is sampled: wrap the env with VecNormalize(..., norm_reward=False)"
            )

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_relabelled_version"]
