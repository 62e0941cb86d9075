"""
``AD``: Algorithm Distillation (Laskin et al. 2022) with Stable-Baselines3's shape.

``AD(histories).learn()`` trains :class:`~sb3_pref.ad.model.ADTransformer` to predict the source
learners' actions from windows of their learning histories. ``predict(obs, state, episode_start)``
then plays in context with frozen weights: the context (the transitions so far) is the recurrent
``state``, reset only at ``episode_start``, exactly like an RL2 model's hidden state. Observations
are those of a :class:`~sb3_pref.envs.trial.TrialWrapper` (``[obs, previous action, previous reward,
previous done]``), so ``evaluate_adaptation`` plays AD and RL2 on the same held-out trials.
"""

import contextlib
import os
import time
from typing import Any, Optional, Union

import numpy as np
import torch as th
import torch.nn.functional as F
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, ConvertCallback, ProgressBarCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.utils import configure_logger, get_device, set_random_seed
from stable_baselines3.common.vec_env import VecEnv

# resolve_precision stays importable from here, where it was defined before sb3_pref.ad.arguments
from sb3_pref.ad.arguments import (
    HistoriesLike,
    as_histories,
    check_histories,
    check_schedule,
    fit_histories,
    resolve_precision,
    reward_values_of,
)
from sb3_pref.ad.context import State, predict_in_context
from sb3_pref.ad.histories import Histories
from sb3_pref.ad.model import ADConfig, ADTransformer
from sb3_pref.ad.persistence import MODEL_FORMAT_VERSION, load_ad, save_ad  # noqa: F401 (re-exported)
from sb3_pref.ad.windows import WindowSampler
from sb3_pref.core.checks import check_bool


class AD:
    """
    :param histories: a :class:`Histories`, a path to one, or a list of them (same spaces)
    :param env: a trial env (VecEnv) for evaluation and callbacks; optional, checked against the histories
    :param seq_len: transitions per context window
    :param embed_dim: token width
    :param n_layers: transformer blocks
    :param n_heads: attention heads
    :param ff_dim: feed-forward width
    :param attention_dropout: dropout on attention weights
    :param residual_dropout: dropout on residual branches
    :param recency_bias: ALiBi distance penalty in attention (off in the seed's preset; see :class:`ADConfig`)
    :param token_layout: ``"triplet"`` (the seed's: observation, action and reward tokens) or ``"transition"``
        (one token per transition, about nine times cheaper attention; see :mod:`sb3_pref.ad.model`)
    :param learning_rate: Adam's peak learning rate
    :param min_learning_rate: the end of the cosine decay
    :param n_updates: length of the cosine decay and the default number of updates of ``learn``
    :param batch_size: windows per update
    :param betas: Adam's betas
    :param max_grad_norm: gradient clipping
    :param max_history_steps: keep only the first transitions of each history (None: all)
    :param pad_short_histories: let histories be shorter than ``seq_len``: each such history is one window
        from its first transition, right-padded, and the padding carries no loss. For histories that must
        fit whole in the context, such as the episode-stride views of ``Histories.subsampled``: a window
        then starts where the learner started, as an evaluation trial does. False: every history must
        hold at least ``seq_len`` transitions
    :param burn_in: a window that starts after its history's first transition is trained on its actions from the
        ``burn_in``-th on (R2D2's burn-in). Its first steps see a short context, which in evaluation only a trial's
        start has, where the agent, like a learner at its first steps, has found nothing yet; a learner in the middle
        of its history acts on what it found before the window, so copying it there teaches purpose without
        knowledge. 0: every step of every window trains
    :param first_window_fraction: share of the windows that start at their history's first transition (the rest
        start uniformly), so that the steps after a short context, which ``burn_in`` leaves to these windows, are
        learned from enough of them
    :param reward_categories: ``"auto"`` (categories when the histories hold at most 16 reward values),
        True or False
    :param dtype: ``"auto"``, ``"float32"`` or ``"bfloat16"`` (see :func:`resolve_precision`)
    :param device: ``"auto"``, ``"cpu"``, ``"cuda"``...
    :param seed: seed of the initial weights, the window sampler, dropout and ``predict``'s sampling
    :param verbose: 1 prints the log table
    :param tensorboard_log: TensorBoard folder (None: none)
    """

    def __init__(
        self,
        histories: Optional[HistoriesLike],
        env: Optional[VecEnv] = None,
        seq_len: int = 256,
        embed_dim: int = 64,
        n_layers: int = 4,
        n_heads: int = 4,
        ff_dim: int = 2048,
        attention_dropout: float = 0.5,
        residual_dropout: float = 0.1,
        recency_bias: bool = False,
        token_layout: str = "triplet",
        learning_rate: float = 3e-4,
        min_learning_rate: float = 2e-6,
        n_updates: int = 22_000,
        batch_size: int = 32,
        betas: tuple[float, float] = (0.9, 0.99),
        max_grad_norm: float = 1.0,
        max_history_steps: Optional[int] = 800_000,
        pad_short_histories: bool = False,
        burn_in: int = 0,
        first_window_fraction: float = 0.0,
        reward_categories: Union[str, bool] = "auto",
        dtype: str = "auto",
        device: Union[th.device, str] = "auto",
        seed: Optional[int] = None,
        verbose: int = 0,
        tensorboard_log: Optional[str] = None,
        _config: Optional[ADConfig] = None,
        _reward_values: Optional[list[float]] = None,
    ) -> None:
        check_schedule(seq_len, n_updates, batch_size, learning_rate, min_learning_rate, burn_in, first_window_fraction)
        self.device = get_device(device)
        self.use_bf16 = resolve_precision(self.device, dtype)
        self.dtype = dtype
        self.hyperparameters: dict[str, Any] = dict(
            learning_rate=learning_rate,
            min_learning_rate=min_learning_rate,
            n_updates=int(n_updates),
            batch_size=int(batch_size),
            betas=tuple(betas),
            max_grad_norm=max_grad_norm,
            max_history_steps=max_history_steps,
            pad_short_histories=check_bool("pad_short_histories", pad_short_histories),
            burn_in=int(burn_in),
            first_window_fraction=float(first_window_fraction),
        )
        self.seed, self.verbose, self.tensorboard_log = seed, verbose, tensorboard_log
        self.num_timesteps = 0
        self._n_updates = 0
        self.env: Optional[VecEnv] = None
        self._logger: Optional[Logger] = None
        self._custom_logger = False
        self._predict_rng = np.random.default_rng(seed)
        if seed is not None:
            set_random_seed(seed, using_cuda=self.device.type == "cuda")

        if _config is None:
            data = fit_histories(histories, seq_len, max_history_steps, pad_short_histories)
            self.reward_values = reward_values_of(data, reward_categories)
            _config = ADConfig(
                obs_dim=data.obs_dim,
                n_actions=data.n_actions,
                max_timestep=data.max_episode_length,
                n_reward_values=len(self.reward_values),
                seq_len=int(seq_len),
                embed_dim=embed_dim,
                n_layers=n_layers,
                n_heads=n_heads,
                ff_dim=ff_dim,
                attention_dropout=attention_dropout,
                residual_dropout=residual_dropout,
                recency_bias=bool(recency_bias),
                token_layout=token_layout,
            )
            self.histories: Optional[Histories] = data
        else:
            self.reward_values = list(_reward_values or [])
            self.histories = None
        self.config = _config
        self.policy = ADTransformer(_config).to(self.device)
        self.optimizer = th.optim.Adam(self.policy.parameters(), lr=learning_rate, betas=(float(betas[0]), float(betas[1])))
        if env is not None:
            self.set_env(env)
        self._windows: Optional[WindowSampler] = None
        self._sampler_state: Optional[th.Tensor] = None  # a loaded model's window sequence, until the sampler is built

    # --- SB3-shaped accessors -------------------------------------------------------------
    @property
    def logger(self) -> Logger:
        if self._logger is None:
            self._logger = configure_logger(self.verbose, self.tensorboard_log, "AD", True)
        return self._logger

    def set_logger(self, logger: Logger) -> None:
        """Use this logger in ``learn`` (as in SB3, instead of configuring one)."""
        self._logger = logger
        self._custom_logger = True

    def get_env(self) -> Optional[VecEnv]:
        return self.env

    @property
    def trial_obs_dim(self) -> int:
        """Width of a trial observation: obs, one-hot previous action, previous reward, previous done."""
        return self.config.obs_dim + self.config.n_actions + 2

    def set_env(self, env: VecEnv) -> None:
        """:raises ValueError: when the env's spaces do not match the histories'"""
        shape = getattr(env.observation_space, "shape", None)
        n_actions = getattr(env.action_space, "n", None)
        if shape != (self.trial_obs_dim,) or n_actions != self.config.n_actions:
            raise ValueError(
                f"env of mismatched spaces: AD expects trial observations of width {self.trial_obs_dim} "
                f"(obs {self.config.obs_dim} + {self.config.n_actions} actions + 2) and {self.config.n_actions} actions, "
                f"got {env.observation_space} and {env.action_space}; wrap the histories' env in a TrialWrapper"
            )
        self.env = env

    # --- training ------------------------------------------------------------------------------
    @property
    def window_sampler(self) -> WindowSampler:
        """The sampler of training windows, built from the histories on first use (a loaded model's continues the
        saved window sequence)."""
        if self._windows is None:
            if self.histories is None:
                raise ValueError("this AD was loaded without histories: pass them with set_histories() before learn()")
            hp = self.hyperparameters
            self._windows = WindowSampler(
                self.histories,
                self.config.seq_len,
                hp["batch_size"],
                self.reward_values,
                self.device,
                self.seed,
                burn_in=hp["burn_in"],
                first_window_fraction=hp["first_window_fraction"],
                state=self._sampler_state,
            )
            self._sampler_state = None
        return self._windows

    def set_histories(self, histories: Union[Histories, str, os.PathLike]) -> None:
        """Give a loaded model histories to train on; they must match its spaces."""
        data = as_histories(histories)
        check_histories(data, self.config, self.hyperparameters["pad_short_histories"])
        self.histories, self._windows = data, None

    def _learning_rate(self, update: int) -> float:
        hp = self.hyperparameters
        progress = min(update / hp["n_updates"], 1.0)
        return hp["min_learning_rate"] + 0.5 * (hp["learning_rate"] - hp["min_learning_rate"]) * (1 + np.cos(np.pi * progress))

    def _autocast(self) -> Any:
        if not self.use_bf16:
            return contextlib.nullcontext()
        return th.autocast(device_type=self.device.type, dtype=th.bfloat16)

    def train_step(self) -> dict[str, float]:
        """One gradient update on a fresh batch of windows; :return: loss, accuracy, grad norm, lr"""
        self.policy.train()
        obs, actions, rewards, timesteps, real = self.window_sampler.batch()
        lr = self._learning_rate(self._n_updates)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with self._autocast():
            logits = self.policy(obs, actions, rewards, timesteps)
        flat_logits, flat_actions = logits.float().reshape(-1, self.config.n_actions), actions.reshape(-1)
        if bool(real.all()):
            loss = F.cross_entropy(flat_logits, flat_actions)
        else:  # right padding of short histories (causal attention keeps it out of the real steps' outputs), burn-in
            loss = F.cross_entropy(flat_logits[real.reshape(-1)], flat_actions[real.reshape(-1)])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.hyperparameters["max_grad_norm"])
        self.optimizer.step()
        self._n_updates += 1
        accuracy = (logits.argmax(-1) == actions)[real].float().mean()
        return dict(loss=loss.item(), accuracy=accuracy.item(), grad_norm=grad_norm.item(), learning_rate=lr)

    def learn(
        self,
        total_timesteps: Optional[int] = None,
        callback: Union[BaseCallback, list[BaseCallback], None] = None,
        log_interval: int = 100,
        tb_log_name: str = "AD",
        reset_num_timesteps: bool = True,
        progress_bar: bool = False,
    ) -> "AD":
        """
        Train on the histories. Offline: a "timestep" here is one gradient update on a batch of
        windows, so callbacks' ``num_timesteps`` and the logger's x-axis count updates.

        :param total_timesteps: updates to run (None: ``n_updates``, the schedule length)
        :param callback: SB3 callback(s), called after every update
        :param log_interval: updates between dumps of the ``ad/`` keys
        :param tb_log_name: TensorBoard run name
        :param reset_num_timesteps: restart the update count (and the learning-rate schedule)
        :param progress_bar: show SB3's progress bar
        """
        total = self.hyperparameters["n_updates"] if total_timesteps is None else int(total_timesteps)
        if total < 1:
            raise ValueError(f"total_timesteps must be >= 1, got {total_timesteps!r}")
        # built here, so that a model without histories fails before any callback starts
        self.window_sampler  # noqa: B018
        if reset_num_timesteps:
            self.num_timesteps = self._n_updates = 0
        if not self._custom_logger:
            self._logger = configure_logger(self.verbose, self.tensorboard_log, tb_log_name, reset_num_timesteps)
        callbacks = callback if isinstance(callback, list) else [callback] if callback is not None else []
        callbacks = [c if isinstance(c, BaseCallback) else ConvertCallback(c) for c in callbacks]
        if progress_bar:
            callbacks.append(ProgressBarCallback())
        hook = CallbackList(callbacks)
        hook.init_callback(self)  # type: ignore[arg-type]
        self._total_timesteps = self.num_timesteps + total
        hook.on_training_start(locals(), globals())
        # This call's rate: a continued run (reset_num_timesteps=False) starts from a non-zero count.
        start, first, end = time.perf_counter(), self.num_timesteps, self.num_timesteps + total
        while self.num_timesteps < end:
            stats = self.train_step()
            self.num_timesteps += 1
            # Dump before the callback, so the update a callback stops on is still logged.
            if log_interval and self.num_timesteps % log_interval == 0:
                for key, value in stats.items():
                    self.logger.record(f"ad/{key}", value)
                self.logger.record("time/updates", self.num_timesteps)
                rate = (self.num_timesteps - first) / max(time.perf_counter() - start, 1e-9)
                self.logger.record("time/updates_per_s", rate)
                self.logger.dump(step=self.num_timesteps)
            hook.update_locals(locals())
            if not hook.on_step():
                break
        hook.on_training_end()
        return self

    # --- in-context play (sb3_pref.ad.context) ---------------------------------------------
    def predict(
        self,
        observation: np.ndarray,
        state: Optional[State] = None,
        episode_start: Optional[np.ndarray] = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, State]:
        """
        One action per env from the context so far. Each call appends the previous transition (the
        last observation, and the action, reward and done that the trial observation reports) to
        the context; ``episode_start`` (a trial start) empties it.

        :param observation: ``(n_envs, obs_dim + n_actions + 2)`` trial observations
        :param state: the context returned by the previous call (None: empty)
        :param episode_start: ``(n_envs,)`` True where a new trial starts
        :param deterministic: take the most likely action instead of sampling
        :return: actions ``(n_envs,)`` and the new context
        """
        return predict_in_context(self, observation, state, episode_start, deterministic)

    # --- persistence (sb3_pref.ad.persistence) ---------------------------------------------
    def save(self, path: Union[str, os.PathLike]) -> None:
        """
        A zip of ``config.json``, ``weights.npz`` and ``training.npz`` (plain arrays): no pickle anywhere.
        ``training.npz`` holds Adam's moments and the random states (window sampler, torch's, ``predict``'s),
        so that ``load`` then ``learn(reset_num_timesteps=False)`` continues exactly where training stopped.
        """
        save_ad(self, path)

    @classmethod
    def load(
        cls, path: Union[str, os.PathLike], env: Optional[VecEnv] = None, device: Union[th.device, str] = "auto", **kwargs: Any
    ) -> "AD":
        """
        :param path: a file written by :meth:`save`
        :param env: a trial env to attach (checked)
        :param device: where to put the model
        :param kwargs: ``histories`` to continue training on, ``verbose``, ``tensorboard_log``
        """
        return load_ad(cls, path, env, device, **kwargs)
