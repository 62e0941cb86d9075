"""
The reward model's network: ``E`` MLPs stored as stacked weights and run as one batched matmul per layer.

Separate from :mod:`sb3_pref.common.reward_model` because the layers know nothing about preferences,
features or training: they are plain ``nn.Module`` building blocks (and B-Pref's network size), which
:class:`~sb3_pref.common.reward_model.RewardModel` builds and trains.
"""

import math

import torch as th
from torch import nn

#: The output activations a reward model accepts, by the name B-Pref's ``activation`` argument uses.
OUTPUT_ACTIVATIONS = {"tanh": nn.Tanh, "sig": nn.Sigmoid, "relu": nn.ReLU}


class EnsembleLinear(nn.Module):
    """
    ``E`` independent linear layers evaluated as one batched matmul, so an ensemble costs one
    kernel per layer instead of one per member.

    :param ensemble_size: number of members ``E``
    :param in_features: input width
    :param out_features: output width
    """

    def __init__(self, ensemble_size: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(th.empty(ensemble_size, in_features, out_features))
        self.bias = nn.Parameter(th.empty(ensemble_size, 1, out_features))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # The same distribution as torch.nn.Linear's default, drawn per member.
        bound = 1.0 / math.sqrt(self.weight.shape[1])
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: th.Tensor) -> th.Tensor:
        """:param x: ``(E, M, in)``, or ``(M, in)`` shared by all members; :return: ``(E, M, out)``"""
        return th.baddbmm(self.bias, x.expand(self.weight.shape[0], *x.shape[-2:]), self.weight)


#: The hidden width of B-Pref's reward model (``RewardModel(hidden_dim=BPREF_HIDDEN_DIM)`` builds its network)
BPREF_HIDDEN_DIM = 256
#: ... and its number of hidden layers
BPREF_N_LAYERS = 3


def build_ensemble(ensemble_size: int, input_dim: int, hidden_dim: int, n_layers: int, activation: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = input_dim
    for _ in range(n_layers):
        layers += [EnsembleLinear(ensemble_size, width, hidden_dim), nn.LeakyReLU()]
        width = hidden_dim
    layers += [EnsembleLinear(ensemble_size, width, 1), OUTPUT_ACTIVATIONS[activation]()]
    return nn.Sequential(*layers)


__all__ = ["BPREF_HIDDEN_DIM", "BPREF_N_LAYERS", "OUTPUT_ACTIVATIONS", "EnsembleLinear", "build_ensemble"]
