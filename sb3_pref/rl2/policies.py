"""
Recurrent actor-critic policies for RL2: sb3-contrib's LSTM policy with a GRU option and a
faster sequence pass for training.
"""

from typing import Any, ClassVar, Literal, Optional, Union

import torch as th
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, CombinedExtractor, FlattenExtractor, NatureCNN
from stable_baselines3.common.type_aliases import Schedule
from torch import nn

RecurrentCell = Literal["lstm", "gru"]


class GRUWithCellState(nn.Module):
    """
    An ``nn.GRU`` behind ``nn.LSTM``'s calling convention, so that RecurrentPPO's buffers, rollouts
    and ``predict()`` (which all pass ``(hidden, cell)`` pairs) work unchanged. The cell part is
    passed through untouched: it starts at zero, is only ever zeroed at episode starts, and the GRU
    never reads it.

    :param input_size: input features
    :param hidden_size: hidden units per layer
    :param num_layers: stacked GRU layers
    :param gru_kwargs: other ``nn.GRU`` arguments (``batch_first`` is not supported)
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, **gru_kwargs: Any) -> None:
        super().__init__()
        if gru_kwargs.get("batch_first", False):
            raise ValueError("lstm_kwargs['batch_first'] must stay False: sequences are fed time-major")
        self.gru = nn.GRU(input_size, hidden_size, num_layers=num_layers, **gru_kwargs)

    @property
    def input_size(self) -> int:
        return self.gru.input_size

    @property
    def hidden_size(self) -> int:
        return self.gru.hidden_size

    @property
    def num_layers(self) -> int:
        return self.gru.num_layers

    def forward(self, inputs: th.Tensor, states: tuple[th.Tensor, th.Tensor]) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
        hidden, cell = states
        output, hidden = self.gru(inputs, hidden.contiguous())
        return output, (hidden, cell)


class RL2Policy(RecurrentActorCriticPolicy):
    """
    ``RecurrentActorCriticPolicy`` with a choice of recurrent cell. It takes every argument of
    sb3-contrib's policy (``lstm_hidden_size``, ``n_lstm_layers``, ``shared_lstm``,
    ``enable_critic_lstm``, ``lstm_kwargs``, ...); with a GRU they size and configure the GRU, and
    the modules keep the names ``lstm_actor`` / ``lstm_critic`` that RecurrentPPO reads.

    Training is faster than the parent's: RecurrentPPO cuts minibatches into sequences at episode
    starts, so a reset can only happen at a sequence's first step. This policy applies that reset
    to the initial state and runs each minibatch through the recurrent module in one call, where
    the parent falls back to a Python loop over time steps whenever any sequence starts an episode.
    Sequences with a reset further in are still handed to the parent's loop.

    :param observation_space: observation space
    :param action_space: action space
    :param lr_schedule: learning rate schedule
    :param recurrent_cell: ``"lstm"`` or ``"gru"``; ``None`` takes the class default
    :param kwargs: the other arguments of ``RecurrentActorCriticPolicy``
    """

    default_cell: ClassVar[RecurrentCell] = "lstm"
    default_features_extractor: ClassVar[type[BaseFeaturesExtractor]] = FlattenExtractor

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        recurrent_cell: Optional[RecurrentCell] = None,
        **kwargs: Any,
    ) -> None:
        recurrent_cell = recurrent_cell or self.default_cell
        if recurrent_cell not in ("lstm", "gru"):
            raise ValueError(f"recurrent_cell must be 'lstm' or 'gru', got {recurrent_cell!r}")
        kwargs.setdefault("features_extractor_class", self.default_features_extractor)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)
        self.recurrent_cell = recurrent_cell
        if recurrent_cell == "gru":
            # A GRU behind nn.LSTM's calling convention, under the names RecurrentPPO reads.
            self.lstm_actor = self._make_gru(self.lstm_actor)  # type: ignore[assignment]
            if self.lstm_critic is not None:
                self.lstm_critic = self._make_gru(self.lstm_critic)  # type: ignore[assignment]
            # The parent built its optimizer over the LSTM weights just replaced (call as SB3 writes it).
            self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def _make_gru(self, lstm: nn.LSTM) -> GRUWithCellState:
        return GRUWithCellState(lstm.input_size, lstm.hidden_size, lstm.num_layers, **self.lstm_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        # The parent leaves its recurrent arguments out, which breaks policy.save() / load() for any
        # non-default size; recording them here makes a standalone policy round trip exact.
        data = super()._get_constructor_parameters()
        data.update(
            recurrent_cell=self.recurrent_cell,
            lstm_hidden_size=self.lstm_output_dim,
            n_lstm_layers=self.lstm_actor.num_layers,
            shared_lstm=self.shared_lstm,
            enable_critic_lstm=self.enable_critic_lstm,
            lstm_kwargs=self.lstm_kwargs,
        )
        return data

    # sb3-contrib annotates the result as (Tensor, Tensor) but returns (output, (hidden, cell)), as here.
    @staticmethod
    def _process_sequence(  # type: ignore[override]
        features: th.Tensor,
        lstm_states: tuple[th.Tensor, th.Tensor],
        episode_starts: th.Tensor,
        lstm: Union[nn.LSTM, GRUWithCellState],
    ) -> tuple[th.Tensor, tuple[th.Tensor, th.Tensor]]:
        """
        Run padded sequences through the recurrent module.

        :param features: ``(n_seq * length, features_dim)``, sequence-major
        :param lstm_states: initial ``(hidden, cell)``, each ``(n_layers, n_seq, hidden_size)``
        :param episode_starts: ``(n_seq * length,)``, 1 where the state must be reset before the step
        :param lstm: the recurrent module
        :return: outputs ``(n_seq * length, hidden_size)`` and the final states
        """
        n_seq = lstm_states[0].shape[1]
        starts = episode_starts.reshape((n_seq, -1)).swapaxes(0, 1)
        if th.any(starts[1:] != 0.0):
            # The parent's loop takes any module with nn.LSTM's calling convention (see above for the result).
            return RecurrentActorCriticPolicy._process_sequence(  # type: ignore[return-value]
                features,
                lstm_states,
                episode_starts,
                lstm,  # type: ignore[arg-type]
            )
        keep = (1.0 - starts[0]).view(1, n_seq, 1)
        sequence = features.reshape((n_seq, -1, lstm.input_size)).swapaxes(0, 1)
        output, states = lstm(sequence, (lstm_states[0] * keep, lstm_states[1] * keep))
        return th.flatten(output.transpose(0, 1), start_dim=0, end_dim=1), states


class RL2GruPolicy(RL2Policy):
    """:class:`RL2Policy` with a GRU by default."""

    default_cell: ClassVar[RecurrentCell] = "gru"


class RL2CnnPolicy(RL2Policy):
    """:class:`RL2Policy` with a NatureCNN features extractor by default."""

    default_features_extractor: ClassVar[type[BaseFeaturesExtractor]] = NatureCNN


class RL2CnnGruPolicy(RL2CnnPolicy):
    """:class:`RL2CnnPolicy` with a GRU by default."""

    default_cell: ClassVar[RecurrentCell] = "gru"


class RL2MultiInputPolicy(RL2Policy):
    """:class:`RL2Policy` for Dict observations."""

    default_features_extractor: ClassVar[type[BaseFeaturesExtractor]] = CombinedExtractor


class RL2MultiInputGruPolicy(RL2MultiInputPolicy):
    """:class:`RL2MultiInputPolicy` with a GRU by default."""

    default_cell: ClassVar[RecurrentCell] = "gru"


MlpLstmPolicy = RL2Policy
MlpGruPolicy = RL2GruPolicy
CnnLstmPolicy = RL2CnnPolicy
CnnGruPolicy = RL2CnnGruPolicy
MultiInputLstmPolicy = RL2MultiInputPolicy
MultiInputGruPolicy = RL2MultiInputGruPolicy
