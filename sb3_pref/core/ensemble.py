"""
The reward model's network: ``E`` MLPs stored as stacked weights and run as one batched matmul per layer.

Separate from :mod:`sb3_pref.core.reward_model` because the layers know nothing about preferences,
features or training: they are plain ``nn.Module`` building blocks (and B-Pref's network size), which
:class:`~sb3_pref.core.reward_model.RewardModel` builds and trains.
"""

import math
from typing import Any, Optional

import torch as th
from torch import nn

#: The output activations a reward model accepts, by the name B-Pref's ``activation`` argument uses.
OUTPUT_ACTIVATIONS = {"tanh": nn.Tanh, "sig": nn.Sigmoid, "relu": nn.ReLU}


def _autocasting() -> bool:
    """:return: whether CPU autocast is on (``is_autocast_enabled("cpu")`` from torch 2.4 on)"""
    try:
        return bool(th.is_autocast_enabled("cpu"))
    except TypeError:  # torch 2.3
        return bool(th.is_autocast_cpu_enabled())


class _HeadLinear(th.autograd.Function):
    """
    ``baddbmm(bias, x, weight)`` for a one-output layer, with autograd's own gradients but one: the input's gradient,
    ``grad @ weight^T``, is a product of a column and a row (one term per entry, no sum), which CPU BLAS computes on a
    slow path (13.7 ms against 1.2 ms for a training step's 3 x 12,800 x 64 entries, timed on an AVX2-only AMD EPYC).
    A broadcast multiply gives the same bits. The weight's and the bias's gradients are the very calls autograd makes,
    so a training run's every number stays as it was.
    """

    @staticmethod
    def forward(ctx: Any, bias: th.Tensor, x: th.Tensor, weight: th.Tensor) -> th.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.bias_shape = bias.shape
        return th.baddbmm(bias, x, weight)

    @staticmethod
    def backward(ctx: Any, grad: th.Tensor) -> tuple[Optional[th.Tensor], ...]:
        x, weight = ctx.saved_tensors
        grad_bias = grad.sum_to_size(ctx.bias_shape) if ctx.needs_input_grad[0] else None
        grad_x = grad * weight.transpose(1, 2) if ctx.needs_input_grad[1] else None
        grad_weight = x.transpose(1, 2).bmm(grad) if ctx.needs_input_grad[2] else None
        return grad_bias, grad_x, grad_weight


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
        x = x.expand(self.weight.shape[0], *x.shape[-2:])
        # The head's faster backward is for float32 on a CPU: under autocast (bfloat16 training), and on a GPU, whose
        # BLAS has no such slow path, baddbmm keeps its own.
        if self.weight.shape[2] == 1 and x.device.type == "cpu" and th.is_grad_enabled() and not _autocasting():
            return _HeadLinear.apply(self.bias, x, self.weight)
        return th.baddbmm(self.bias, x, self.weight)


#: The hidden width of B-Pref's reward model (``RewardModel(hidden_dim=BPREF_HIDDEN_DIM)`` builds its network)
BPREF_HIDDEN_DIM = 256
#: ... and its number of hidden layers
BPREF_N_LAYERS = 3


#: a standardised input is clipped to this many standard deviations (VecNormalize's ``clip_obs``)
INPUT_CLIP = 10.0
#: added to the variance before the square root (VecNormalize's ``epsilon``)
INPUT_EPSILON = 1e-8


class EnsembleMLP(nn.Sequential):
    """
    The members' layers, after an input standardisation that is the identity until :meth:`fit_inputs`
    sets it, once: ``clip((x - mean) / sqrt(var + eps), -10, 10)`` per input feature.

    Why: the features are raw observations and actions of very different scales (cartpole's pole angular
    velocity spans about +-15, its cosine +-1). Without standardisation a small ensemble fits the first labels
    mostly through the largest feature: on cartpole_swingup's pretraining data, models fitted on 100 labels
    correlated 0.08-0.55 with the true reward and mostly with the angular velocity; standardised, 0.87-0.90
    (``benchmarks/quality_grid/README.md``, which also says why it is off by default). The statistics are frozen after the
    first fit, because moving them would change the reward of every state between two rounds.

    The layers keep ``nn.Sequential``'s names (``0.weight``, ...), and a state dict saved before the
    standardisation existed loads as a frozen identity.

    :param layers: the layers, as ``nn.Sequential`` takes them
    :param input_dim: width of the input
    """

    input_mean: th.Tensor
    input_std: th.Tensor
    input_clip: th.Tensor
    input_fitted: th.Tensor

    def __init__(self, *layers: nn.Module, input_dim: int) -> None:
        super().__init__(*layers)
        self.register_buffer("input_mean", th.zeros(input_dim))
        self.register_buffer("input_std", th.ones(input_dim))
        self.register_buffer("input_clip", th.tensor(math.inf))
        self.register_buffer("input_fitted", th.tensor(False))
        # Mirrors the buffers as a Python bool, so an unstandardised forward pass (the per-step prediction of an
        # off-policy run) pays no extra tensor operations.
        self._standardise = False

    @property
    def inputs_fitted(self) -> bool:
        return bool(self.input_fitted)

    def fit_inputs(self, features: th.Tensor) -> None:
        """Freeze the standardisation to the mean and std of ``(..., input_dim)`` features."""
        flat = features.reshape(-1, features.shape[-1]).float()
        with th.no_grad():
            self.input_mean.copy_(flat.mean(0))
            self.input_std.copy_(th.sqrt(flat.var(0, unbiased=False) + INPUT_EPSILON))
            self.input_clip.fill_(INPUT_CLIP)
            self.input_fitted.fill_(True)
        self._standardise = True

    def forward(self, x: th.Tensor) -> th.Tensor:
        if self._standardise:
            x = ((x - self.input_mean) / self.input_std).clamp(-self.input_clip, self.input_clip)
        return super().forward(x)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        # A model saved before the standardisation existed: keep its function (identity, never fitted again).
        if prefix + "input_fitted" not in state_dict:
            state_dict[prefix + "input_mean"] = th.zeros_like(self.input_mean)
            state_dict[prefix + "input_std"] = th.ones_like(self.input_std)
            state_dict[prefix + "input_clip"] = th.tensor(math.inf)
            state_dict[prefix + "input_fitted"] = th.tensor(True)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        # An identity (an older file) needs no operations either.
        self._standardise = self.inputs_fitted and bool(th.isfinite(self.input_clip))


def build_ensemble(ensemble_size: int, input_dim: int, hidden_dim: int, n_layers: int, activation: str) -> EnsembleMLP:
    layers: list[nn.Module] = []
    width = input_dim
    for _ in range(n_layers):
        # In place: the activation overwrites the layer's output, which nothing else reads (the matmul's backward
        # needs its inputs, the activation's its sign); the same numbers, one pass over memory fewer each way.
        layers += [EnsembleLinear(ensemble_size, width, hidden_dim), nn.LeakyReLU(inplace=True)]
        width = hidden_dim
    layers += [EnsembleLinear(ensemble_size, width, 1), OUTPUT_ACTIVATIONS[activation]()]
    return EnsembleMLP(*layers, input_dim=input_dim)


__all__ = ["BPREF_HIDDEN_DIM", "BPREF_N_LAYERS", "OUTPUT_ACTIVATIONS", "EnsembleLinear", "EnsembleMLP", "build_ensemble"]
