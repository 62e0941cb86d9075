"""
Saving and loading a preference-learning algorithm with SB3's own ``save`` / ``load``: the reward model's
weights and optimizer, and everything else preference learning needs to continue exactly (labels,
stored segments, budget, teacher, pretraining buffer), travel in SB3's zip as extra "state dicts".
"""

from typing import TYPE_CHECKING, Any, Optional

from sb3_pref.common.entropy import StateEntropyReward
from sb3_pref.common.learner import PreferenceLearner, to_numpy_state, to_torch_state
from sb3_pref.common.reward_model import RewardModel
from sb3_pref.common.validation import check_saved_model_file

if TYPE_CHECKING:
    # For type checkers only, as in rlhf.py: at run time the base is object and the MRO is unchanged.
    from stable_baselines3.common.base_class import BaseAlgorithm as _Base
else:
    _Base = object


class PreferencePersistenceMixin(_Base):
    """The save/load side of :class:`~sb3_pref.common.sb3_glue.PreferenceAlgorithmMixin` (RLHF adds its own)."""

    reward_model: Optional[RewardModel]
    pref_learner: Optional[PreferenceLearner]
    entropy_reward: Optional[StateEntropyReward]
    entropy_k: int
    _policy_before_pretraining: Optional[dict[str, Any]]

    @classmethod
    def load(cls, path: Any, env: Any = None, device: Any = "auto", **kwargs: Any) -> Any:  # type: ignore[override]
        """
        SB3's ``load``, plus: a ``teacher=`` given here keeps its settings (and, for an object, its
        random generator) instead of the saved teacher's, while the run's counters and bookkeeping
        continue in it; a damaged file raises one clear ``ValueError`` that names it.

        :param path: the saved model (``.zip``), a path or an open file
        :param env: the env to continue on (same spaces as at save time)
        :param device: torch device
        :param kwargs: attributes to set on the loaded model (``teacher``, ``reward_model``, ...) and
            SB3's ``custom_objects``, ``print_system_info``, ``force_reset``
        """
        if kwargs.get("teacher") is not None:
            kwargs["_teacher_given_at_load"] = "preset" if isinstance(kwargs["teacher"], str) else "object"
        check_saved_model_file(path)
        return super().load(path, env=env, device=device, **kwargs)

    def _excluded_save_params(self) -> list[str]:
        pref = [
            "reward_model", "teacher", "pref_learner", "entropy_reward", "_pref_encoder", "_teacher_given_at_load",
            "_policy_before_pretraining",
        ]  # fmt: skip
        return [*super()._excluded_save_params(), *pref]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()
        if self.reward_model is not None:
            state_dicts = [*state_dicts, "reward_model.ensemble", "reward_model.optimizer", "pref_state"]
        return state_dicts, variables

    @property
    def pref_state(self) -> "_PreferenceState":
        """SB3 saves and loads this like a module: labels, segments, budget, teacher and pretraining buffer."""
        return _PreferenceState(self)


class _PreferenceState:
    """Adapter giving SB3's ``save``/``set_parameters`` the ``state_dict`` interface of a module."""

    def __init__(self, algorithm: PreferencePersistenceMixin) -> None:
        self.algorithm = algorithm

    def state_dict(self) -> dict[str, Any]:
        algorithm = self.algorithm
        state: dict[str, Any] = {"learner": algorithm.pref_learner.state_dict()}  # type: ignore[union-attr]
        if algorithm.entropy_reward is not None:
            state["entropy"] = to_torch_state(algorithm.entropy_reward.state_dict())
            state["entropy_config"] = {
                "obs_dim": algorithm.entropy_reward.obs_dim,
                "capacity": algorithm.entropy_reward.capacity,
            }
        if algorithm._policy_before_pretraining is not None:
            state["policy_before_pretraining"] = algorithm._policy_before_pretraining
        return state

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        algorithm = self.algorithm
        algorithm.pref_learner.load_state_dict(state["learner"])  # type: ignore[union-attr]
        if "entropy" in state:
            config = state["entropy_config"]
            algorithm.entropy_reward = StateEntropyReward(
                int(config["obs_dim"]), capacity=int(config["capacity"]), k=algorithm.entropy_k
            )
            algorithm.entropy_reward.load_state_dict(to_numpy_state(state["entropy"]))
        if "policy_before_pretraining" in state:
            device = algorithm.policy.device
            algorithm._policy_before_pretraining = {
                name: tensor.to(device) for name, tensor in state["policy_before_pretraining"].items()
            }




__all__ = ["PreferencePersistenceMixin"]
