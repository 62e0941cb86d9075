"""
Saving and loading :class:`~sb3_pref.ad.ad.AD` in a safe format: a zip of ``config.json``,
``weights.npz`` and ``training.npz`` (plain arrays, read with ``allow_pickle=False``).
``training.npz`` holds Adam's moments and the random states, so that training resumes exactly.
"""

import io
import json
import os
import zipfile
from typing import Any, Callable, Optional, Protocol, TypeVar, Union

import numpy as np
import torch as th
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.ad.model import ADConfig
from sb3_pref.ad.windows import WindowSampler


class SavedAD(Protocol):
    """What saving and loading read and write of an :class:`~sb3_pref.ad.ad.AD` model (the class is above this
    module: naming it here would close an import circle)."""

    config: ADConfig
    reward_values: list[float]
    hyperparameters: dict[str, Any]
    dtype: str
    seed: Optional[int]
    num_timesteps: int
    _n_updates: int
    _predict_rng: np.random.Generator
    _windows: Optional[WindowSampler]
    _sampler_state: Optional[th.Tensor]

    @property
    def policy(self) -> th.nn.Module: ...

    @property
    def optimizer(self) -> th.optim.Optimizer: ...

    def set_histories(self, histories: Any) -> Any: ...


ModelT = TypeVar("ModelT", bound=SavedAD)

MODEL_FORMAT_VERSION = 1


def save_ad(model: SavedAD, path: Union[str, os.PathLike]) -> None:
    """
    A zip of ``config.json``, ``weights.npz`` and ``training.npz`` (plain arrays): no pickle anywhere.
    ``training.npz`` holds Adam's moments and the random states (window sampler, torch's, ``predict``'s),
    so that ``load`` then ``learn(reset_num_timesteps=False)`` continues exactly where training stopped.

    :param model: the model to save
    :param path: the file (``.zip`` is added when missing)
    """
    optimizer = model.optimizer.state_dict()
    header = dict(
        format_version=MODEL_FORMAT_VERSION,
        config=model.config.to_dict(),
        reward_values=model.reward_values,
        hyperparameters={**model.hyperparameters, "betas": list(model.hyperparameters["betas"])},
        num_timesteps=model.num_timesteps,
        n_updates=model._n_updates,
        dtype=model.dtype,
        seed=model.seed,
        param_groups=optimizer["param_groups"],
        predict_rng=model._predict_rng.bit_generator.state,
    )
    weights, training = io.BytesIO(), io.BytesIO()
    np.savez(weights, **{k: v.detach().float().cpu().numpy() for k, v in model.policy.state_dict().items()})
    arrays: dict[str, Any] = {
        f"adam/{index}/{key}": th.as_tensor(value).detach().cpu().numpy()
        for index, state in optimizer["state"].items()
        for key, value in state.items()
    }
    arrays["torch_rng"] = th.get_rng_state().numpy()
    if model._windows is not None:
        arrays["sampler_rng"] = model._windows.generator.get_state().numpy()
    elif model._sampler_state is not None:
        arrays["sampler_rng"] = model._sampler_state.numpy()
    np.savez(training, **arrays)
    path = os.fspath(path)
    path = path if path.endswith(".zip") else f"{path}.zip"
    tmp = f"{path}.tmp"  # atomic: an interrupted save never leaves half a model where a resume would read it
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("config.json", json.dumps(header))
        archive.writestr("weights.npz", weights.getvalue())
        archive.writestr("training.npz", training.getvalue())
    os.replace(tmp, path)


def load_ad(
    cls: Callable[..., ModelT],
    path: Union[str, os.PathLike],
    env: Optional[VecEnv] = None,
    device: Union[th.device, str] = "auto",
    **kwargs: Any,
) -> ModelT:
    """
    :param cls: ``AD`` (or a subclass)
    :param path: a file written by :func:`save_ad`
    :param env: a trial env to attach (checked)
    :param device: where to put the model
    :param kwargs: ``histories`` to continue training on, ``verbose``, ``tensorboard_log``
    """
    path = os.fspath(path)
    if not os.path.isfile(path) and os.path.isfile(f"{path}.zip"):
        path = f"{path}.zip"
    try:
        with zipfile.ZipFile(path) as archive:
            header = json.loads(archive.read("config.json"))
            with np.load(io.BytesIO(archive.read("weights.npz")), allow_pickle=False) as weights:
                state = {k: th.as_tensor(weights[k]) for k in weights.files}
            training: dict[str, np.ndarray] = {}
            if "training.npz" in archive.namelist():  # absent from files saved before it existed
                with np.load(io.BytesIO(archive.read("training.npz")), allow_pickle=False) as arrays:
                    training = {k: arrays[k] for k in arrays.files}
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as error:
        raise ValueError(f"{path!r} is not a readable AD model ({error})") from error
    if header.get("format_version") != MODEL_FORMAT_VERSION:
        version = header.get("format_version")
        raise ValueError(f"{path!r} has AD format version {version!r}, expected {MODEL_FORMAT_VERSION}")
    hp = header["hyperparameters"]
    config = ADConfig(**header["config"])
    histories = kwargs.pop("histories", None)
    hp = {**hp, "betas": tuple(hp["betas"])}
    model = cls(
        None,
        env=env,
        device=device,
        dtype=header.get("dtype", "auto"),
        seed=header.get("seed"),
        _config=config,
        _reward_values=header["reward_values"],
        seq_len=config.seq_len,
        **hp,
        **kwargs,
    )
    model.policy.load_state_dict(state)
    model.num_timesteps = int(header.get("num_timesteps", 0))
    model._n_updates = int(header.get("n_updates", model.num_timesteps))
    _restore_training_state(model, header, training)
    if histories is not None:
        model.set_histories(histories)
    return model


def _restore_training_state(model: SavedAD, header: dict[str, Any], training: dict[str, np.ndarray]) -> None:
    """Adam's moments and the random states written by :meth:`save` (a no-op for older files)."""
    if "param_groups" in header:
        moments: dict[int, dict[str, th.Tensor]] = {}
        for name, value in training.items():
            if name.startswith("adam/"):
                _, index, key = name.split("/")
                moments.setdefault(int(index), {})[key] = th.as_tensor(value)
        model.optimizer.load_state_dict({"state": moments, "param_groups": header["param_groups"]})
    if "predict_rng" in header:
        model._predict_rng.bit_generator.state = header["predict_rng"]
    if "torch_rng" in training:  # dropout draws from torch's global generator
        th.set_rng_state(th.as_tensor(training["torch_rng"]))
    if "sampler_rng" in training:
        model._sampler_state = th.as_tensor(training["sampler_rng"])
