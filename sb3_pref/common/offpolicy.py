"""
The preference core on an SB3 off-policy algorithm (SAC): PEBBLE's replay-buffer side.

The same :class:`~sb3_pref.common.rollout.RolloutRecorder` and
:class:`~sb3_pref.core.learner.PreferenceLearner` serve both families; what differs is where the
rewards live. An off-policy ``collect_rollouts`` stores each transition in a replay buffer and calls
``on_rollout_end`` every ``train_freq`` steps; the :class:`ReplayRewardWriter` of :class:`OffPolicyPreferenceMixin`
(the :class:`~sb3_pref.common.controller.RewardWriter` of a replay buffer) then

- during pretraining, adds the rollout's raw observations to the k-NN set and, at train time,
  rewards each sampled batch with its state entropy against the whole set (as PEBBLE does, so the
  reward of old transitions shrinks as the set grows); with RIME's warm start (``rime_warm_start``), the reward
  model is regressed onto that reward after each update;
- after pretraining, writes the reward model's predictions for the new transitions into the replay
  buffer, and after every reward-model update relabels the **whole** buffer with
  :func:`relabel_replay_buffer` in bounded chunks.

The replay buffer already holds the raw (never VecNormalize-d) observations SB3 stores, and the
actions in the policy's [-1, 1] scale: both are re-encoded on the fly, so no extra memory is needed.
"""

from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Union

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.type_aliases import TrainFrequencyUnit
from stable_baselines3.common.vec_env import VecEnv
from torch import nn

from sb3_pref.common.algorithm import PreferenceAlgorithmMixin
from sb3_pref.common.controller import PHASE_PRETRAIN
from sb3_pref.common.options import OFF_POLICY, document_options, takes_options
from sb3_pref.common.replay_samplers import EntropyRewardSampler, EntropySource, Observation, RecentHalfSampler
from sb3_pref.core.entropy import StateEntropyReward
from sb3_pref.core.learner import PreferenceLearner
from sb3_pref.core.rime import WARM_START_STEPS, warm_start_targets
from sb3_pref.core.teachers import REPLAY_STREAM, stream_generator

if TYPE_CHECKING:
    # For type checkers only: the mixin runs inside an SB3 off-policy algorithm. At run time the base is object.
    from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm as _OffPolicyBase
else:
    _OffPolicyBase = object

#: what an update can sample in place of the replay buffer
ReplaySampler = Union[EntropyRewardSampler, RecentHalfSampler]


class ReplayWriterHost(EntropySource, Protocol):
    """What :class:`ReplayRewardWriter` uses of the off-policy algorithm: SB3's members and the stored options."""

    replay_buffer: Any  # SB3's ReplayBuffer, swapped for an EntropyRewardSampler during pretraining updates
    policy: Any  # a SACPolicy: unscale_action, critic, critic_target
    learning_starts: int
    num_timesteps: int  # RUNE's beta_t at a relabelling
    seed: Optional[int]  # the run's seed: the writer's own generator (QPA's hybrid replay, RIME's warm start)
    batch_size: int  # SAC's batch: the warm start regresses on batches of the same size
    reset_critic: bool
    reset_update: int
    relabel_chunk_size: int
    rime_warm_start: bool

    @property
    def logger(self) -> Logger: ...

    @property
    def pref_learner(self) -> Optional[PreferenceLearner]: ...

    def _reward_actions(self, actions: np.ndarray) -> np.ndarray: ...


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


class ReplayRewardWriter:
    """
    Writes the learned rewards into an off-policy algorithm's replay buffer, and the state-entropy reward into the
    batches sampled while pretraining (see the module docstring).

    :param host: the algorithm
    """

    #: the plain values saved in SB3's data file, by the names of the algorithm attributes that held them before
    #: (the writer's generator state is new: it has no older name)
    SAVED_NAMES = ("_pending_reset_updates", "_replay_rng_state")

    def __init__(self, host: ReplayWriterHost) -> None:
        self.host = host
        self.pending_reset_updates = 0
        # QPA's recent half of each batch (SB3 draws the other half with numpy's global generator, as always);
        # made at first use, once the algorithm has its seed.
        self._rng: Optional[np.random.Generator] = None
        # Which reward model state the buffer's rewards come from; None forces a full relabel (e.g. after load).
        self.relabelled_version: Optional[tuple] = None

    # ------------------------------------------------------------------ RewardWriter
    @property
    def seed_steps(self) -> int:
        """SAC's ``learning_starts``: random actions and no gradient step (pretraining covers them too)."""
        return self.host.learning_starts

    def entropy_capacity(self, n_transitions: int, unsuper_step: int) -> int:
        # PEBBLE scores a state against every stored state: the k-NN set is the pretraining part of the buffer.
        return max(self.host.learning_starts + unsuper_step, n_transitions)

    def rollout_complete(self, obs: np.ndarray) -> None:
        pass

    def pretrain_rollout(self, entropy: StateEntropyReward, obs: np.ndarray, seen: np.ndarray) -> None:
        """The rollout's states join the k-NN set; the sampled batches are rewarded at train time (:meth:`train`)."""
        entropy.add(obs.reshape(seen.size, -1))

    def write_rewards(self, predicted: np.ndarray, seen: np.ndarray) -> None:
        """After a reward-model update the whole buffer is relabelled, else the rollout's own (newest) rows."""
        if self.relabelled_version != self._reward_version():
            self.relabel()
            return
        buffer = self.host.replay_buffer
        rows = (buffer.pos - len(predicted) + np.arange(len(predicted))) % buffer.buffer_size
        buffer.rewards[rows] = predicted.astype(np.float32)

    def reset_value_head(self) -> None:
        """PEBBLE resets the critic (both Q-networks, their target copy and the critic's optimizer), not the actor or alpha."""
        if not self.host.reset_critic:
            return
        policy = self.host.policy
        critic, target = policy.critic, policy.critic_target
        for module in (layer for q_net in critic.q_networks for layer in q_net.modules()):
            if isinstance(module, nn.Linear):
                module.reset_parameters()
        target.load_state_dict(critic.state_dict())
        critic.optimizer.state.clear()
        self.pending_reset_updates = self.host.reset_update

    def saved_values(self) -> dict[str, Any]:
        # The generator's state, once it has drawn: a run saved during QPA's hybrid replay or RIME's warm start
        # draws on after load what the uninterrupted run draws (None: not made yet, made from the seed at first use).
        rng_state = self._rng.bit_generator.state if self._rng is not None else None
        return dict(zip(self.SAVED_NAMES, (self.pending_reset_updates, rng_state)))

    def load_saved_values(self, values: dict[str, Any]) -> None:
        self.pending_reset_updates = values.get("_pending_reset_updates", self.pending_reset_updates)
        rng_state = values.get("_replay_rng_state")
        if rng_state is not None:  # files saved before the state was kept make it from the seed, as they did
            self._generator().bit_generator.state = rng_state

    # ------------------------------------------------------------------ the replay buffer
    def _reward_version(self) -> tuple:
        learner = self.host.pref_learner
        assert learner is not None, "relabelling happens only with a reward model"
        return (learner.reward_model.n_updates, learner.reward_shift, learner.reward_scale)

    def relabel(self) -> int:
        """Rewrite every reward in the replay buffer with the current reward model; :return: the transitions relabelled"""
        host, learner = self.host, self.host.pref_learner
        assert learner is not None, "relabelling happens only with a reward model"

        def reward_fn(obs: Observation, buffer_actions: np.ndarray) -> np.ndarray:
            # The reward model saw env actions (what the recorder copies); the buffer holds them in [-1, 1].
            actions = host.policy.unscale_action(buffer_actions)
            # RUNE's bonus (if on) at this relabelling's beta_t: it is refreshed with every relabelling
            return learner.predict_rewards(host._reward_features(obs), host._reward_actions(actions), host.num_timesteps)

        n = relabel_replay_buffer(host.replay_buffer, reward_fn, chunk_size=host.relabel_chunk_size)
        self.relabelled_version = self._reward_version()
        host.logger.record("reward/relabelled", n)
        return n

    def plan_update(self, gradient_steps: int, pretraining: bool) -> tuple[int, Optional[ReplaySampler]]:
        """
        What the algorithm's next update takes: its gradient steps plus those owed after a critic reset, and what
        to sample in place of the replay buffer (the entropy reward while pretraining, QPA's hybrid replay while
        labels remain; None: the buffer itself). The algorithm swaps the buffer; the writer only says what to use.

        :param gradient_steps: SAC's steps for this update
        :param pretraining: whether the rollout just collected is a pretraining one
        :return: the gradient steps and the sampler
        """
        host = self.host
        gradient_steps += self.pending_reset_updates
        self.pending_reset_updates = 0
        if pretraining and host.entropy_reward is not None:
            return gradient_steps, EntropyRewardSampler(host.replay_buffer, host)
        if not pretraining and (recent_rows := self.qpa_recent_rows()):
            host.logger.record("reward/qpa_recent_rows", recent_rows)
            return gradient_steps, RecentHalfSampler(host.replay_buffer, recent_rows, self._generator())
        return gradient_steps, None

    def update_done(self, sampler: Optional[ReplaySampler]) -> None:
        """
        :param sampler: what the update sampled (:meth:`plan_update`): logs the entropy reward it gave, and with
            RIME's warm start regresses the reward model onto it, :data:`WARM_START_STEPS` batches per gradient step
        """
        if isinstance(sampler, EntropyRewardSampler) and sampler.rewards:
            self.host.logger.record("reward/entropy_reward_mean", float(np.mean(sampler.rewards)))
            if self.host.rime_warm_start:
                self.warm_start(WARM_START_STEPS * len(sampler.rewards), self.host.batch_size)

    def warm_start(self, n_steps: int, batch_size: int) -> None:
        """
        RIME's warm start: ``n_steps`` regression steps of the reward model, each on ``batch_size`` transitions drawn
        from the replay buffer with the writer's own generator (SAC's draws stay as they are), onto their
        state-entropy reward (:func:`~sb3_pref.core.rime.warm_start_targets`; the running statistics are read,
        not updated).
        """
        host, learner, entropy = self.host, self.host.pref_learner, self.host.entropy_reward
        if learner is None or entropy is None or n_steps < 1:
            return
        buffer = host.replay_buffer
        upper = buffer.buffer_size if buffer.full else buffer.pos
        rng = self._generator()
        losses = []
        for _ in range(n_steps):
            rows, envs = rng.integers(upper, size=batch_size), rng.integers(buffer.n_envs, size=batch_size)
            if isinstance(buffer.observations, dict):
                obs: Observation = {key: value[rows, envs] for key, value in buffer.observations.items()}
            else:
                obs = buffer.observations[rows, envs]
            obs_features = host._reward_features(obs)
            targets = warm_start_targets(
                entropy.knn_distance(obs_features), float(entropy.distance_stats.mean), entropy.distance_std
            )
            actions = host._reward_actions(host.policy.unscale_action(buffer.actions[rows, envs]))
            features = th.as_tensor(np.concatenate([obs_features, actions], axis=-1), dtype=th.float32)
            losses.append(learner.trainer.regress(features, th.as_tensor(targets)))
        host.logger.record("reward/warm_start_loss", float(np.mean(losses)))

    def _generator(self) -> np.random.Generator:
        """The writer's draws (QPA's recent half, the warm start's batches): the replay stream of the run's seed."""
        if self._rng is None:
            self._rng = stream_generator(self.host.seed, REPLAY_STREAM)
        return self._rng

    def qpa_recent_rows(self) -> int:
        """
        QPA's hybrid replay: the newest buffer rows that hold the last ``qpa_episodes`` episodes (by the mean
        length of the recent ones; every row filled while none has ended), while labels remain; 0 when it is off.
        """
        learner = self.host.pref_learner
        if learner is None or not learner.qpa_episodes or learner.budget_left <= 0:
            return 0
        buffer = self.host.replay_buffer
        lengths = learner.store.recent_episode_lengths[-learner.qpa_episodes :]
        if len(lengths) == 0:
            return buffer.buffer_size if buffer.full else max(1, buffer.pos)
        return max(1, int(np.ceil(lengths.mean() * learner.qpa_episodes / buffer.n_envs)))


@document_options(OFF_POLICY)
class OffPolicyPreferenceMixin(PreferenceAlgorithmMixin, _OffPolicyBase):
    """
    Preference-based reward learning for an SB3 off-policy algorithm with a replay buffer
    (``class SAC_REWARD(OffPolicyPreferenceMixin, SAC)``): B-Pref's PEBBLE flow, its rewards written by a
    :class:`ReplayRewardWriter`.

    Pretraining covers the ``learning_starts`` seed steps plus ``unsuper_step`` steps (B-Pref's
    ``num_seed_steps + num_unsup_steps``). When it ends: a uniform query round, the whole buffer
    relabelled, the critic reset (:meth:`ReplayRewardWriter.reset_value_head`) and ``reset_update`` extra
    gradient steps. Without pretraining, the seed steps keep the env's reward (nothing trains on them) and
    the first round comes right after them.

    :param args: the algorithm's positional arguments
    :param kwargs: the algorithm's keyword arguments and the off-policy preference options:

    (then the preference options, declared in sb3_pref.common.options: see help() or the table of the API page)
    """

    # For type checkers: replay_buffer is swapped for an EntropyRewardSampler during pretraining updates.
    replay_buffer: Any

    option_family = OFF_POLICY
    reset_critic: bool
    reset_update: int
    relabel_chunk_size: int
    rime_warm_start: bool
    _reward_writer: ReplayRewardWriter

    @takes_options(OFF_POLICY)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # PreferenceAlgorithmMixin takes the options, and refuses the on-policy ones (they act on a rollout).
        super().__init__(*args, **kwargs)

    def _make_reward_writer(self, kwargs: dict[str, Any]) -> ReplayRewardWriter:
        return ReplayRewardWriter(self)

    def relabel_replay_buffer(self) -> int:
        """
        Rewrite every reward in the replay buffer with the current reward model, in batched passes.

        :return: the number of transitions relabelled
        """
        return self._reward_writer.relabel()

    def _rollout_steps(self) -> int:
        # SB3 has converted train_freq to a TrainFreq by now. With an episode unit (one env only, SB3 asserts) a
        # rollout is `frequency` whole episodes: with the env's time limit, that many times the limit, and rounds
        # planned closer than that would be asked one per rollout and their labels lost. Without a known limit the
        # plan counts in single steps (the controller warns if rollouts turn out longer).
        frequency = int(getattr(self.train_freq, "frequency", 1))
        if getattr(self.train_freq, "unit", None) != TrainFrequencyUnit.EPISODE:
            return frequency * int(self.n_envs)
        limit = episode_limit(self.env) if self.env is not None else None
        return frequency * limit * int(self.n_envs) if limit else int(self.n_envs)

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        """SAC's update, with ``reset_update`` more steps after a critic reset, on the entropy reward while pretraining."""
        pretraining = self.preference.rollout_phase == PHASE_PRETRAIN
        gradient_steps, sampler = self._reward_writer.plan_update(gradient_steps, pretraining)
        if sampler is None:
            return super().train(gradient_steps=gradient_steps, batch_size=batch_size)
        # SAC's train samples self.replay_buffer, so the sampler stands in for it for this one update.
        buffer = self.replay_buffer
        self.replay_buffer = sampler
        try:
            super().train(gradient_steps=gradient_steps, batch_size=batch_size)
        finally:
            self.replay_buffer = buffer
        self._reward_writer.update_done(sampler)

    def _check_reward_normalization(self) -> None:
        vec_normalize = self.get_vec_normalize_env()
        if self.reward_model is not None and vec_normalize is not None and vec_normalize.norm_reward:
            raise ValueError(
                "VecNormalize(norm_reward=True) would rescale the learned reward by the true reward's statistics "
                "when the replay buffer is sampled: wrap the env with VecNormalize(..., norm_reward=False)"
            )


def episode_limit(env: VecEnv) -> Optional[int]:
    """
    :param env: the training env
    :return: the episode step limit every env shares (its spec's ``max_episode_steps``, else a ``TimeLimit``'s), or
        None when an env has none or they differ
    """
    limits = {getattr(spec, "max_episode_steps", None) for spec in env.get_attr("spec")}
    if None in limits:
        # has_attr first: a SubprocVecEnv's worker dies of an AttributeError raised by get_attr
        if not env.has_attr("_max_episode_steps"):  # no TimeLimit anywhere in the wrappers
            return None
        limits = set(env.get_attr("_max_episode_steps"))
    if len(limits) != 1:
        return None
    (limit,) = limits
    return int(limit) if isinstance(limit, (int, np.integer)) and limit > 0 else None
