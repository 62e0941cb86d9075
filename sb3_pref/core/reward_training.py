"""
How much the reward model trains in a query round (the schedule), and on what hardware settings; the
:class:`~sb3_pref.core.reward_trainer.RewardTrainer` runs the rounds.

Two schedules:

- ``"bpref"``: B-Pref's. Up to ``max_epochs`` (``re_update``) passes over every label so far,
  stopping after the first pass whose training accuracy exceeds ``target_accuracy`` (0.97).
  On tasks whose pairs are hard to separate the stop never fires and each round costs
  ``re_update`` passes over all labels: the cost grows with labels x rounds.
- ``"auto"`` (the default): early stopping on held-out labels. The labels are split by position
  into :data:`N_FOLDS` folds; ensemble member ``m`` never trains on fold ``m`` and measures its
  Bradley-Terry loss there after every pass (so each label is trained on by all members but at most
  one, and the ensemble's mean uses every label). The model is warm-started from the last round;
  a member whose held-out loss has not improved for ``patience`` passes (at least :data:`PATIENCE_PASSES`
  passes and :data:`PATIENCE_STEPS` gradient steps) is done, and the round ends when all are done,
  or after ``max_epochs`` passes. Each member then goes back to the weights of its best held-out
  loss. A round also runs at least ``ceil(passes_per_new_label * n_new / train_batch_size)`` steps, so
  the new labels are learnt. The stop measures generalisation, not training accuracy: warm-started
  rounds end after a few passes once more labels no longer help, which is what keeps the cost down.
  With fewer than :data:`MIN_FOLD` labels per fold there is nothing to hold out and a round follows
  ``"bpref"`` (a cheap round: the data are tiny).

With ``anneal_lr`` the learning rate decays linearly to 0 over the round's gradient steps
(``lr * (1 - step / n_steps)``, so the last step uses ``lr / n_steps``) and no early stop applies: a
round that stopped early would end with the learning rate still high. ``"auto"`` then runs the
new-label budget (capped at ``max_epochs`` passes) on all labels, without holding any out.
"""

import math
from functools import lru_cache

import numpy as np
import torch as th

REWARD_SCHEDULES = ("auto", "bpref")
TRAIN_DTYPES = ("auto", "float32", "bfloat16")
#: ``"auto"``: the least a round trains, in passes over its new labels (as gradient steps on minibatches of all labels)
PASSES_PER_NEW_LABEL = 10.0
#: ``"auto"``: labels are split into this many held-out folds by position (member ``m`` holds out fold ``m``)
N_FOLDS = 10
#: ``"auto"``: the fewest labels per fold for early stopping; below ``N_FOLDS * MIN_FOLD`` labels a round follows ``"bpref"``
MIN_FOLD = 3
#: ``"auto"``: a member stops after this many passes without a held-out improvement ...
PATIENCE_PASSES = 3
#: ... and at least this many gradient steps (small datasets make one pass a single step)
PATIENCE_STEPS = 5
#: ``"auto"``: an improvement must lower the held-out loss by this fraction of the best so far
MIN_REL_IMPROVEMENT = 1e-3


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
    and measured 4x slower; on an AMD EPYC with AVX512-BF16 and no AMX, training measured 3.8x (default
    network) to 4.5x (B-Pref's) faster in bf16 (``benchmarks/overhead/bf16_cpu.py``, ``benchmarks/README.md``). The
    choice is made from the hardware's flags, not timed, so the same machine always gives the same result.

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


def round_steps(schedule: str, n_pairs: int, n_new: int, batch_size: int, max_epochs: int, passes_per_new_label: float) -> int:
    """
    :return: the gradient steps a round may take: all ``max_epochs`` passes for ``"bpref"``;
        ``ceil(passes_per_new_label * n_new / batch_size)`` (at least 1) capped by them for ``"auto"``
    """
    steps_per_epoch = math.ceil(n_pairs / batch_size)
    cap = max_epochs * steps_per_epoch
    if schedule == "bpref":
        return cap
    return max(1, min(cap, math.ceil(passes_per_new_label * n_new / batch_size)))


def held_out_folds(n_pairs: int, ensemble_size: int, device: th.device) -> tuple[th.Tensor, th.Tensor]:
    """
    Split pairs ``0..n_pairs-1`` by position into :data:`N_FOLDS` folds (pair ``i`` is in fold ``i % N_FOLDS``);
    member ``m`` holds out fold ``m % N_FOLDS``. Rows are cut to the shortest fold (sizes differ by at most
    one), so the members stack into one batched pass.

    :return: ``(E, L)`` the pairs each member trains on, ``(E, V)`` the pairs it is scored on
    """
    index = np.arange(n_pairs)
    folds = [index[index % N_FOLDS == m % N_FOLDS] for m in range(ensemble_size)]
    trains = [index[index % N_FOLDS != m % N_FOLDS] for m in range(ensemble_size)]
    n_val, n_train = min(map(len, folds)), min(map(len, trains))
    as_tensor = lambda rows: th.as_tensor(np.stack(rows), device=device)  # noqa: E731
    return as_tensor([t[:n_train] for t in trains]), as_tensor([f[:n_val] for f in folds])
