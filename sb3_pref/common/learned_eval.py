"""
Keeping the best policy of a run that has no reward to judge it by.

SB3's ``EvalCallback`` keeps the policy whose evaluation episodes return the most *true* reward, which a run taught
from preferences does not have (a person's task has none; a scripted teacher's is the thing it must not see). Its
learned reward is a judge of its own: once labelling is over it ranks whole evaluation episodes of cartpole_swingup
as the true reward does (Spearman 0.92-0.98 over the 35 episodes after the last label, development seeds 0-3,
``benchmarks/defaults/README.md``), while the policy itself swings between about 800 and 200 from one tenth of the
run to the next. :class:`LearnedRewardEvalCallback` is ``EvalCallback`` with the learned reward as the judge.
"""

import os
from typing import TYPE_CHECKING, Any, Optional, cast

import numpy as np
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import sync_envs_normalization, unwrap_vec_normalize

if TYPE_CHECKING:
    from sb3_pref.core.learner import PreferenceLearner


#: the file, beside ``best_model.zip``, of the ``VecNormalize`` statistics the kept policy was judged with
VEC_NORMALIZE_FILE = "best_model_vecnormalize.pkl"


class LearnedRewardEvalCallback(EvalCallback):
    """
    ``EvalCallback`` that judges by the run's learned reward: every ``eval_freq`` calls it plays
    ``n_eval_episodes`` episodes on ``eval_env`` (as ``EvalCallback``, deterministic by default), scores each by
    the reward model's return (the policy's reward, normalised as the policy sees it), and saves the policy whose
    episodes score highest as ``best_model_save_path/best_model.zip``. When the training env is wrapped in
    ``VecNormalize``, its statistics at that moment are saved beside it as ``best_model_vecnormalize.pkl``
    (:data:`VEC_NORMALIZE_FILE`): the kept policy acts on observations normalised by them, not by the end-of-run ones
    (``VecNormalize.load(path, venv)`` restores them; SB3's ``EvalCallback`` leaves this to ``callback_on_new_best``).

    Scores are comparable only under one reward model: when a query round retrains it, the best score so far is
    forgotten and the next evaluation starts a new best (the saved file stays until then). With the planned
    schedule every label is asked by a third of the run, so the best model is the best of the last two thirds.

    Logged under ``eval/``: ``mean_learned_return`` (the judge), and SB3's ``mean_reward`` and ``mean_ep_length``
    (the env's own reward, for a scripted teacher's task a check the run never uses). ``best_mean_learned_return``
    and ``best_timestep`` are attributes; ``log_path`` gets ``evaluations.npz`` with ``timesteps``, ``results`` (the
    env's returns, as SB3 writes them), ``learned_results`` and ``ep_lengths``.

    :param eval_env: the env to evaluate on (wrapped in a ``DummyVecEnv`` if it is not a VecEnv)
    :param kwargs: ``EvalCallback``'s other arguments (``n_eval_episodes``, ``eval_freq``, ``best_model_save_path``,
        ``log_path``, ``deterministic``, ``callback_on_new_best``, ``verbose``, ...)
    """

    def __init__(self, eval_env: Any, **kwargs: Any) -> None:
        super().__init__(eval_env, **kwargs)
        self.best_mean_learned_return = -np.inf
        self.best_timestep: Optional[int] = None
        self.evaluations_learned: list[list[float]] = []
        self._judged_rounds: Optional[int] = None

    def _init_callback(self) -> None:
        if getattr(self.model, "pref_learner", None) is None:
            raise TypeError(
                f"LearnedRewardEvalCallback judges by a learned reward: {type(self.model).__name__} has none; use it "
                "with PPO_REWARD, SAC_REWARD or RL2 (or SB3's EvalCallback with the env's reward)"
            )
        super()._init_callback()

    @property
    def _learner(self) -> "PreferenceLearner":
        """The run's preference learner (checked to exist when the callback starts)."""
        learner: PreferenceLearner = self.model.pref_learner  # type: ignore[attr-defined]  # SB3 types the model as BaseAlgorithm
        return learner

    def _learned_returns(self) -> tuple[list[float], list[float], list[int]]:
        """Play the episodes; :return: their learned returns, the env's returns and their lengths"""
        learner, model = self._learner, cast(Any, self.model)  # the preference algorithm: its reward features
        vec_normalize = unwrap_vec_normalize(self.eval_env)
        n_envs = self.eval_env.num_envs
        steps: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n_envs)]
        learned: list[float] = []

        def record(locals_: dict[str, Any], _globals: dict[str, Any]) -> None:
            # Called per env and step with the observation the action was taken on. The reward model sees what the
            # rollouts store: raw observations (not VecNormalize's), encoded by the algorithm's own features
            # (one-hot discrete actions, flattened dicts, RL2's observation part).
            i, observations = locals_["i"], locals_["observations"]
            obs = (
                {key: value[i : i + 1] for key, value in observations.items()}
                if isinstance(observations, dict)
                else (observations[i : i + 1])
            )
            if vec_normalize is not None:
                obs = vec_normalize.unnormalize_obs(obs)
            steps[i].append((model._reward_features(obs)[0], model._reward_actions(locals_["actions"][i : i + 1])[0]))
            info = locals_["info"]
            if locals_["done"] and (not locals_["is_monitor_wrapped"] or "episode" in info):
                features = np.stack([f for f, _ in steps[i]])
                actions = np.stack([a for _, a in steps[i]])
                learned.append(float(np.sum(learner.predict_rewards(features, actions))))
                steps[i].clear()

        returns, lengths = evaluate_policy(
            self.model, self.eval_env, n_eval_episodes=self.n_eval_episodes, render=self.render,
            deterministic=self.deterministic, return_episode_rewards=True, warn=self.warn, callback=record,
        )  # fmt: skip
        return learned, list(map(float, returns)), list(map(int, lengths))  # type: ignore[arg-type]

    def _on_step(self) -> bool:
        if self.eval_freq <= 0 or self.n_calls % self.eval_freq != 0:
            return True
        if self.model.get_vec_normalize_env() is not None:
            sync_envs_normalization(self.training_env, self.eval_env)
        rounds = self._learner.n_rounds
        if rounds != self._judged_rounds:  # a new reward model: its scores start a new comparison
            self._judged_rounds, self.best_mean_learned_return = rounds, -np.inf
        learned, returns, lengths = self._learned_returns()
        mean_learned, mean_return = float(np.mean(learned)), float(np.mean(returns))
        self.last_mean_reward = mean_return
        self.evaluations_timesteps.append(self.num_timesteps)
        self.evaluations_results.append(returns)
        self.evaluations_learned.append(learned)
        self.evaluations_length.append(lengths)
        if self.log_path is not None:
            np.savez(
                self.log_path, timesteps=self.evaluations_timesteps, results=self.evaluations_results,
                learned_results=self.evaluations_learned, ep_lengths=self.evaluations_length,
            )  # fmt: skip
        self.logger.record("eval/mean_learned_return", mean_learned)
        self.logger.record("eval/mean_reward", mean_return)
        self.logger.record("eval/mean_ep_length", float(np.mean(lengths)))
        if self.verbose >= 1:
            print(f"Eval num_timesteps={self.num_timesteps}, learned return={mean_learned:.2f}, env's={mean_return:.2f}")
        self.logger.record("time/total_timesteps", self.num_timesteps, exclude="tensorboard")
        self.logger.dump(self.num_timesteps)
        if mean_learned > self.best_mean_learned_return:
            if self.verbose >= 1:
                print("New best mean learned return!")
            self.best_mean_learned_return, self.best_timestep = mean_learned, self.num_timesteps
            if self.best_model_save_path is not None:
                self.model.save(os.path.join(self.best_model_save_path, "best_model"))
                vec_normalize = self.model.get_vec_normalize_env()
                if vec_normalize is not None:
                    vec_normalize.save(os.path.join(self.best_model_save_path, VEC_NORMALIZE_FILE))
            if self.callback_on_new_best is not None:
                return self.callback_on_new_best.on_step()
        return True
