"""
The learned reward: a Bradley-Terry ensemble of MLPs over ``concat(obs, action)``.

The model is only the ensemble: it predicts, saves and loads. Fitting it to labelled pairs is
:class:`~sb3_pref.core.reward_trainer.RewardTrainer`'s job (the loss, the passes, the round schedules of
:mod:`sb3_pref.core.reward_training`). The network's layers are in :mod:`sb3_pref.core.ensemble`, the model's
file format in :mod:`sb3_pref.core.reward_model_io`.
"""

import os
from typing import Any, Optional, Union

import numpy as np
import torch as th

from sb3_pref.core.checks import check_int, check_positive_float

# The network's layers live in ensemble.py; they are imported here too, where they were first defined,
# so `from sb3_pref.core.reward_model import EnsembleLinear, BPREF_HIDDEN_DIM, ...` keeps working.
from sb3_pref.core.ensemble import BPREF_HIDDEN_DIM, BPREF_N_LAYERS, OUTPUT_ACTIVATIONS, EnsembleLinear, build_ensemble
from sb3_pref.core.preprocessing import FeatureEncoder, SpaceOrDim
from sb3_pref.core.reward_model_io import load_reward_model, reward_model_config, reward_model_from_config, save_reward_model
from sb3_pref.core.reward_training import resolve_device, resolve_train_dtype
from sb3_pref.core.teachers import BaseTeacher, ScriptedTeacher


class RewardModel:
    """
    An ensemble of MLPs that predicts a per-step reward from ``concat(obs, action)`` and is trained
    with the Bradley-Terry model on preferences over pairs of segments (B-Pref / PrefPPO).

    The predicted reward is the mean over members; their std is the model's uncertainty.
    The model also carries the query settings of the original ``RewardModel`` (segment length,
    query batch, candidate factor) and a teacher, so the B-Pref call shape keeps working:
    ``RewardModel(obs_dim, act_dim, size_segment=50, ..., teacher_beta=-1, ...)``.

    :param obs_dim: observation space, or the flat observation size
    :param act_dim: action space, or the flat action size (pass the space for discrete actions:
        they are one-hot encoded)
    :param size_segment: length ``H`` of the queried segments
    :param activation: output activation: ``"tanh"``, ``"sig"`` or ``"relu"``
    :param lr: Adam learning rate shared by all members (B-Pref's: 3e-4, for its wider network)
    :param mb_size: number of pairs asked per query round; None (default): planned by the algorithm from its
        budget (:mod:`~sb3_pref.core.feedback_plan`), B-Pref's 128 where nothing plans it
    :param initial_mb_size: number of pairs asked at the first query round; None: planned by the algorithm (with
        ``feedback_schedule="bpref"``, or where nothing plans it: ``mb_size``). A larger first round front-loads the
        budget, as Christiano et al. (2017) did: the reward the policy first trains on is then fitted on more labels,
        and moves less in the rounds that follow
    :param teacher_beta: B-Pref teacher rationality (used when ``teacher`` is None)
    :param teacher_gamma: B-Pref teacher myopic discount (used when ``teacher`` is None)
    :param teacher_eps_mistake: B-Pref teacher mistake probability (used when ``teacher`` is None)
    :param teacher_eps_skip: B-Pref teacher skip factor (used when ``teacher`` is None)
    :param teacher_eps_equal: B-Pref teacher equal factor (used when ``teacher`` is None)
    :param large_batch: candidate pairs drawn per kept query, for the non-uniform query methods
    :param ensemble_size: number of members
    :param hidden_dim: width of the hidden layers. The defaults (2 layers of 64, lr 1e-3) are this library's
        choice: B-Pref's 3 layers of 256 at lr 3e-4 (:data:`BPREF_HIDDEN_DIM`, :data:`BPREF_N_LAYERS`, what the
        B-Pref scripts, grids and PEBBLE runs pass) cost about 13 times more per training step on a CPU and
        learned no better reward on the benchmarks (``benchmarks/README.md``)
    :param n_layers: number of hidden layers (B-Pref's: :data:`BPREF_N_LAYERS`)
    :param train_batch_size: minibatch size (in pairs) of reward training
    :param label_margin: label smoothing: targets become ``onehot * (1 - 2m) + m``
    :param train_dtype: ``"float32"`` (B-Pref's), ``"bfloat16"`` (mixed precision for the forward passes
        of training only; weights, optimizer and predictions stay float32), or ``"auto"`` (default):
        bfloat16 where the hardware is faster at it (CUDA with bf16, CPUs with AMX or AVX512-BF16),
        float32 elsewhere; see :func:`~sb3_pref.core.reward_training.resolve_train_dtype`. bfloat16 is
        about 2.8x faster per epoch with AMX and 4x slower without (``benchmarks/README.md``).
    :param teacher: a teacher object; overrides the ``teacher_*`` arguments
    :param device: torch device; ``"auto"`` (default) picks CUDA when available, whatever the policy's device
    :param seed: seed of the parameter initialisation (and of the teacher built from ``teacher_*``);
        None draws from torch's global generator like any ``nn.Module``
    :param input_norm: standardise each input feature by the mean and std of the labelled segments of the
        first training round, frozen afterwards (not in B-Pref; see :class:`~sb3_pref.core.ensemble.EnsembleMLP`)
    """

    def __init__(
        self,
        obs_dim: SpaceOrDim,
        act_dim: SpaceOrDim,
        size_segment: int = 50,
        activation: str = "tanh",
        lr: float = 1e-3,
        mb_size: Optional[int] = None,
        initial_mb_size: Optional[int] = None,
        teacher_beta: float = -1,
        teacher_gamma: float = 1,
        teacher_eps_mistake: float = 0,
        teacher_eps_skip: float = 0,
        teacher_eps_equal: float = 0,
        large_batch: int = 10,
        ensemble_size: int = 3,
        hidden_dim: int = 64,
        n_layers: int = 2,
        train_batch_size: int = 128,
        label_margin: float = 0.0,
        train_dtype: str = "auto",
        teacher: Optional[BaseTeacher] = None,
        device: Union[str, th.device] = "auto",
        seed: Optional[int] = None,
        input_norm: bool = False,
    ) -> None:
        if activation not in OUTPUT_ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is not one of {sorted(OUTPUT_ACTIVATIONS)}")
        size_segment = check_int("size_segment", size_segment, 1, 50)
        if mb_size is not None:
            mb_size = check_int("mb_size", mb_size, 1, 128)
        if initial_mb_size is not None:
            initial_mb_size = check_int("initial_mb_size", initial_mb_size, 1, 200)
        large_batch = check_int("large_batch", large_batch, 1, 10)
        ensemble_size = check_int("ensemble_size", ensemble_size, 1, 3)
        hidden_dim = check_int("hidden_dim", hidden_dim, 1, 256)
        train_batch_size = check_int("train_batch_size", train_batch_size, 1, 128)
        n_layers = check_int("n_layers", n_layers, 0, 3)
        lr = check_positive_float("lr", lr, 3e-4)
        if isinstance(label_margin, bool) or not isinstance(label_margin, (int, float, np.integer, np.floating)):
            raise TypeError(f"label_margin must be a number in [0, 0.5), got {label_margin!r}")
        if not 0.0 <= label_margin < 0.5:
            raise ValueError(f"label_margin must be in [0, 0.5), got {label_margin!r}")
        if teacher is not None and not isinstance(teacher, BaseTeacher):
            raise TypeError(
                f"teacher must be a BaseTeacher or None, got a {type(teacher).__name__}: pass e.g. "
                "teacher=ScriptedTeacher.preset('oracle'), or give the algorithm teacher='oracle'"
            )
        if seed is not None:
            seed = check_int("seed", seed, 0, 0)
        if not isinstance(input_norm, (bool, np.bool_)):
            raise TypeError(f"input_norm must be True or False, got {input_norm!r}")
        self.input_norm = bool(input_norm)
        self.encoder = FeatureEncoder(obs_dim, act_dim)
        self.size_segment = int(size_segment)
        self.activation = activation
        self.lr = float(lr)
        self.mb_size = None if mb_size is None else int(mb_size)
        self.initial_mb_size = None if initial_mb_size is None else int(initial_mb_size)
        self.large_batch = int(large_batch)
        self.ensemble_size = int(ensemble_size)
        self.hidden_dim = int(hidden_dim)
        self.n_layers = int(n_layers)
        self.train_batch_size = int(train_batch_size)
        self.label_margin = float(label_margin)
        self.seed = seed
        self.device = resolve_device(device)
        # The argument as given is what a saved model keeps, so "auto" chooses again on the loading machine.
        self.requested_train_dtype = train_dtype
        self.train_dtype = resolve_train_dtype(train_dtype, self.device)
        if teacher is None:
            teacher = ScriptedTeacher(
                beta=teacher_beta,
                gamma=teacher_gamma,
                eps_mistake=teacher_eps_mistake,
                eps_skip=teacher_eps_skip,
                eps_equal=teacher_eps_equal,
                seed=seed,
            )
        self.teacher = teacher
        self.n_updates = 0
        # A seeded model draws its weights from a forked generator: torch's global stream is left as it was.
        with th.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                th.manual_seed(seed)
            self.ensemble = build_ensemble(ensemble_size, self.input_dim, hidden_dim, n_layers, activation).to(self.device)
        self.optimizer = th.optim.Adam(self.ensemble.parameters(), lr=self.lr)

    @property
    def obs_dim(self) -> int:
        return self.encoder.obs_dim

    @property
    def act_dim(self) -> int:
        return self.encoder.act_dim

    @property
    def input_dim(self) -> int:
        return self.encoder.input_dim

    def reset_parameters(self, seed: Optional[int] = None) -> None:
        """Re-draw all members' weights (from ``seed`` without touching torch's global generator) and reset Adam."""
        # Without a seed, draw from (and advance) the global generator, as nn.Module does: forking it
        # there would hand out the same weights on every call.
        with th.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                th.manual_seed(seed)
            for module in self.ensemble.modules():
                if isinstance(module, EnsembleLinear):
                    module.reset_parameters()
        self.optimizer = th.optim.Adam(self.ensemble.parameters(), lr=self.lr)
        self.n_updates = 0

    # ----------------------------------------------------------------- prediction
    def _as_tensor(self, features: Union[np.ndarray, th.Tensor]) -> th.Tensor:
        if features.shape[-1] != self.input_dim:
            raise ValueError(
                f"features have width {features.shape[-1]} but this reward model was built for "
                f"obs_dim + act_dim = {self.obs_dim} + {self.act_dim} = {self.input_dim}: build it for this env's spaces"
            )
        return th.as_tensor(features, dtype=th.float32, device=self.device)

    def member_rewards(self, features: Union[np.ndarray, th.Tensor], chunk_size: int = 4096) -> th.Tensor:
        """
        :param features: ``(..., input_dim)`` rows of ``concat(obs, action)``
        :param chunk_size: rows per forward pass. Small chunks keep each layer's activations in the CPU's cache: the
            disagreement selection's 125k rows take a third of the time they took in chunks of 65536. On the CPU
            measured (AMD EPYC with AVX512-BF16) the results are the same bits: a row's result does not depend on the
            chunk it is in
        :return: per-member rewards ``(E, ...)`` (no gradient)
        """
        x = self._as_tensor(features)
        flat = x.reshape(-1, self.input_dim)
        with th.no_grad():
            out = [self.ensemble(flat[i : i + chunk_size]).squeeze(-1) for i in range(0, len(flat), chunk_size)]
        rewards = th.cat(out, dim=1) if out else flat.new_zeros(self.ensemble_size, 0)
        return rewards.reshape(self.ensemble_size, *x.shape[:-1])

    def predict(self, features: Union[np.ndarray, th.Tensor]) -> tuple[np.ndarray, np.ndarray]:
        """
        :param features: ``(..., input_dim)`` rows of ``concat(obs, action)``, any batch shape
        :return: mean and std over members, each of the batch shape, float32
        """
        rewards = self.member_rewards(features)
        return rewards.mean(0).cpu().numpy(), rewards.std(0, unbiased=False).cpu().numpy()

    def predict_obs_action(self, obs: Union[np.ndarray, dict], actions: np.ndarray) -> np.ndarray:
        """:return: the mean predicted reward of a batch of raw observations and actions, shape ``(n,)``"""
        return self.predict(self.encoder.encode(obs, actions))[0]

    def member_returns(self, segments: Union[np.ndarray, th.Tensor]) -> np.ndarray:
        """:param segments: ``(N, H, input_dim)``; :return: each member's segment returns ``(E, N)``"""
        return self.member_rewards(segments).sum(-1).cpu().numpy()

    def preference_accuracy(self, features_0: np.ndarray, features_1: np.ndarray, labels: np.ndarray) -> float:
        """Share of non-equal, non-skipped labels whose preferred segment has the higher predicted return."""
        keep = np.isfinite(labels) & (labels != 0.5)
        if not keep.any():
            return float("nan")
        r_0 = self.member_returns(features_0[keep]).mean(0)
        r_1 = self.member_returns(features_1[keep]).mean(0)
        return float(np.mean((r_1 > r_0) == (labels[keep] == 1.0)))

    # ------------------------------------------------------------- persistence
    def get_config(self) -> dict[str, Any]:
        """Plain-data constructor arguments (the teacher is not part of the model's file)."""
        return reward_model_config(self)

    @classmethod
    def from_config(
        cls, config: dict[str, Any], teacher: Optional[BaseTeacher] = None, device: Union[str, th.device] = "auto"
    ) -> "RewardModel":
        return reward_model_from_config(cls, config, teacher=teacher, device=device)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write config, weights and optimizer state (loadable with ``weights_only=True``), atomically."""
        save_reward_model(self, path)

    @classmethod
    def load(
        cls, path: Union[str, os.PathLike], teacher: Optional[BaseTeacher] = None, device: Union[str, th.device] = "auto"
    ) -> "RewardModel":
        """Rebuild a model written by :meth:`save`; the teacher is given anew (an oracle if None)."""
        return load_reward_model(cls, path, teacher=teacher, device=device)


# BPREF_*, EnsembleLinear, OUTPUT_ACTIVATIONS and build_ensemble moved to ensemble.py and stay importable from here.
__all__ = ["BPREF_HIDDEN_DIM", "BPREF_N_LAYERS", "OUTPUT_ACTIVATIONS", "EnsembleLinear", "RewardModel", "build_ensemble"]
