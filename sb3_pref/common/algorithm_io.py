"""
How a preference algorithm goes into SB3's file and comes back: :class:`PreferenceSaveMixin`, the base of
:class:`~sb3_pref.common.algorithm.PreferenceAlgorithmMixin`, overrides SB3's ``save``/``load`` and the lists of what
SB3 leaves out of its data and saves as state dicts.

It is apart from the algorithm's set-up, options and ``learn`` because it is the file format: the controller's and the
writer's plain values go into SB3's data under the names the algorithm attributes had before the glue was composed,
the learner, the entropy set and the kept policy travel as the ``pref_state`` state dict, the reward model as
``reward_model.ensemble`` / ``reward_model.optimizer``, so that files written before keep loading
(``tests/test_load_release.py``). :meth:`~sb3_pref.common.algorithm.PreferenceAlgorithmMixin._setup_model` hands the
saved values back to the controller on load.
"""

from typing import TYPE_CHECKING, Any, Optional

from sb3_pref.common.controller import PreferenceController
from sb3_pref.common.validation import check_saved_model_file
from sb3_pref.core.reward_model import RewardModel

if TYPE_CHECKING:
    # For type checkers only: the mixins (this one and PreferenceAlgorithmMixin on it) run inside an SB3 algorithm.
    # At run time the base is object.
    from stable_baselines3.common.base_class import BaseAlgorithm

    class _Base(BaseAlgorithm):
        """SB3's base algorithm, whose ``learn`` and ``_setup_model`` the algorithm the mixins run in implements."""

        def learn(self, *args: Any, **kwargs: Any) -> Any: ...

        def _setup_model(self) -> None: ...

else:
    _Base = object


class PreferenceSaveMixin(_Base):
    """
    SB3's ``save``/``load`` of a preference algorithm (see the module docstring); the algorithm's other parts are
    :class:`~sb3_pref.common.algorithm.PreferenceAlgorithmMixin`'s.
    """

    # For type checkers: set by PreferenceAlgorithmMixin.__init__ and _setup_model.
    preference: PreferenceController
    reward_model: Optional[RewardModel]

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
        check_saved_model_file(path, cls)
        return super().load(path, env=env, device=device, **kwargs)

    def save(self, path: Any, exclude: Any = None, include: Any = None) -> None:
        """
        SB3's ``save``. The controller's and the writer's plain values (the phase, its counters, RLHF's reference
        settings) go into SB3's data file under the names the algorithm attributes had before they moved there,
        so that files keep one format; :meth:`_setup_model` hands them back on load.
        """
        values = self.preference.saved_values()
        self.__dict__.update(values)
        try:
            super().save(path, exclude=exclude, include=include)
        finally:
            for name in values:
                del self.__dict__[name]

    def _excluded_save_params(self) -> list[str]:
        pref = ["reward_model", "teacher", "preference", "_reward_writer", "_pref_encoder", "_teacher_given_at_load"]
        return [*super()._excluded_save_params(), *pref]

    def _get_torch_save_params(self) -> tuple[list[str], list[str]]:
        state_dicts, variables = super()._get_torch_save_params()
        if self.reward_model is not None:
            state_dicts = [*state_dicts, "reward_model.ensemble", "reward_model.optimizer", "pref_state"]
        return state_dicts, variables

    @property
    def pref_state(self) -> PreferenceController:
        """SB3 saves and loads this like a module: labels, segments, budget, teacher and pretraining buffer."""
        return self.preference


__all__ = ["PreferenceSaveMixin"]
