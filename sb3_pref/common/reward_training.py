"""
How much the reward model trains in a query round (the schedule), and on what hardware settings.

Two schedules:

- ``"bpref"``: B-Pref's. Up to ``max_epochs`` (``re_update``) passes over every label so far,
  stopping after the first pass whose training accuracy exceeds ``target_accuracy`` (0.97).
  On tasks whose pairs are hard to separate the stop never fires and each round costs
  ``re_update`` passes over all labels: the cost grows with labels x rounds.
- ``"auto"`` (the default): the model is warm-started from the last round (as in B-Pref) and
  trains for a budget of gradient steps that grows with the labels *new* in this round,
  ``ceil(passes_per_new_label * n_new / train_batch_size)`` steps, capped by B-Pref's
  ``max_epochs`` passes. Minibatches are drawn from all labels (each member its own
  permutation), so old labels keep being revisited. B-Pref's accuracy stop still ends a round
  early when it fires. The cost grows with the labels only, not labels x rounds.

With ``anneal_lr`` the learning rate decays linearly to 0 over the round's gradient steps
(``lr * (1 - step / n_steps)``, so the last step uses ``lr / n_steps``) and the accuracy stop is
off: a round that stopped early would end with the learning rate still high.
"""

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

import numpy as np
import torch as th

if TYPE_CHECKING:
    from sb3_pref.common.reward_model import RewardModel

REWARD_SCHEDULES = ("auto", "bpref")
TRAIN_DTYPES = ("auto", "float32", "bfloat16")
#: ``"auto"`` schedule: passes over each round's new labels (in gradient steps; the minibatches mix old and new labels)
PASSES_PER_NEW_LABEL = 10.0


def check_schedule(schedule: str, name: str = "schedule") -> str:
    """:return: ``schedule`` if it is one of :data:`REWARD_SCHEDULES`; a ValueError naming ``name`` otherwise"""
    if schedule not in REWARD_SCHEDULES:
        raise ValueError(
            f"{name}={schedule!r} is not one of {list(REWARD_SCHEDULES)}: 'auto' (budget of gradient steps that "
            "grows with the new labels) or 'bpref' (B-Pref's up to re_update passes over all labels)"
        )
    return schedule


@lru_cache(maxsize=1)
def cpu_bf16_flags() -> tuple[str, ...]:
    """
    The CPU flags (Linux ``/proc/cpuinfo``) that make bfloat16 matmuls faster than float32 on a CPU:
    AMX tiles (``amx_bf16``) or AVX512-BF16 (``avx512_bf16``). Empty elsewhere (no such flag, or not Linux).
    """
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return tuple(sorted(flags & {"amx_bf16", "avx512_bf16"}))
    except OSError:
        pass
    return ()


def resolve_train_dtype(train_dtype: str, device: th.device) -> str:
    """
    ``"auto"`` picks bfloat16 only where the hardware computes it faster: a CUDA device that supports
    bf16 (compute capability 8.0 and up), or a CPU with AMX / AVX512-BF16 (:func:`cpu_bf16_flags`).
    Elsewhere float32: on a CPU without them (an AMD EPYC without AVX512-BF16, for one) bf16 is emulated
    and measured 4x slower (``benchmarks/README.md``). The choice is made from the hardware's flags,
    not timed, so the same machine always gives the same result.

    :param train_dtype: ``"auto"``, ``"float32"`` or ``"bfloat16"``
    :param device: the reward model's device
    :return: ``"float32"`` or ``"bfloat16"``
    """
    if train_dtype not in TRAIN_DTYPES:
        raise ValueError(f"train_dtype must be one of {list(TRAIN_DTYPES)}, got {train_dtype!r}")
    if train_dtype != "auto":
        return train_dtype
    if device.type == "cuda":
        return "bfloat16" if th.cuda.is_bf16_supported() else "float32"
    if device.type == "cpu" and cpu_bf16_flags():
        return "bfloat16"
    return "float32"


def resolve_device(device: "str | th.device") -> th.device:
    """``"auto"``: CUDA when available, else CPU (the policy's device is chosen separately)."""
    if device == "auto":
        return th.device("cuda" if th.cuda.is_available() else "cpu")
    return th.device(device)


def round_steps(
    schedule: str, n_pairs: int, n_new: int, batch_size: int, max_epochs: int, passes_per_new_label: float
) -> int:
    """
    :return: the gradient steps a round may take: all ``max_epochs`` passes for ``"bpref"``;
        ``ceil(passes_per_new_label * n_new / batch_size)`` (at least 1) capped by them for ``"auto"``
    """
    steps_per_epoch = math.ceil(n_pairs / batch_size)
    cap = max_epochs * steps_per_epoch
    if schedule == "bpref":
        return cap
    return max(1, min(cap, math.ceil(passes_per_new_label * n_new / batch_size)))


def train_round(
    model: "RewardModel",
    tensors: tuple[th.Tensor, th.Tensor, th.Tensor],
    rng: np.random.Generator,
    n_steps: int,
    target_accuracy: Optional[float],
    anneal_lr: bool,
) -> dict[str, float]:
    """
    Run up to ``n_steps`` gradient steps, in passes over the pairs (the last one possibly cut short);
    stop after a pass whose training accuracy exceeds ``target_accuracy`` (never with ``anneal_lr``
    or a None target). The learning rate is restored afterwards, also on an exception.

    :return: ``{"loss", "accuracy"}`` of the last pass, ``"epochs"`` (passes started), ``"steps"``
    """
    steps_per_epoch = math.ceil(len(tensors[2]) / model.train_batch_size)
    stats: dict[str, float] = {}
    done, epochs = 0, 0
    try:
        while done < n_steps:
            take = min(steps_per_epoch, n_steps - done)
            lr_for_step = None
            if anneal_lr:
                start = done

                def lr_for_step(step: int, start: int = start) -> float:
                    return model.lr * (1.0 - (start + step) / n_steps)

            stats = model._train_epoch(tensors, rng, max_steps=take, lr_for_step=lr_for_step)
            done += take
            epochs += 1
            if not anneal_lr and target_accuracy is not None and stats["accuracy"] > target_accuracy:
                break
    finally:
        for group in model.optimizer.param_groups:
            group["lr"] = model.lr
    return {**stats, "epochs": float(epochs), "steps": float(done)}
