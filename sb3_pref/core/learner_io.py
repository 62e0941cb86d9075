"""
What a :class:`~sb3_pref.core.learner.PreferenceLearner` saves and restores: its budget counters, generators, labelled
pairs, stored segments, the teacher's progress and the state of the methods switched on (RIME's filter, SURF, QPA's
crops), as torch-saveable plain data.

Separate from :mod:`sb3_pref.core.learner` so the preference loop and the format of what a checkpoint holds change
independently; ``PreferenceLearner.state_dict`` and ``load_state_dict`` call these functions and remain the API.
"""

from typing import Any

from sb3_pref.core.state import to_numpy_state, to_torch_state
from sb3_pref.core.teachers import BaseTeacher

# The functions take the learner as ``Any``: importing PreferenceLearner here, even for type checkers only, would
# close a circle with learner.py, whose typed methods (state_dict, load_state_dict) are the API.

#: what a restored learner takes of the saved teacher (``PreferenceLearner.restore_teacher``): ``"all"`` (settings,
#: counters, generator), ``"progress"`` (counters, thresholds and generator, keeping this teacher's settings: a
#: teacher chosen by preset name at load), ``"counters"`` (a teacher object given at load: its settings and
#: generator stay its own; the run's counters, thresholds and bookkeeping, such as the answers a human teacher
#: already handed over, continue) or ``"none"``
RESTORE_TEACHER_MODES = ("all", "progress", "counters", "none")

#: the learner's optional parts (None when their method is off), each saved under its attribute's name
OPTIONAL_PARTS = ("label_filter", "surf", "pair_crops")


def learner_state(learner: Any) -> dict[str, Any]:
    """:return: everything needed to continue exactly: budget, labels, stored segments, generators, teacher state"""
    parts = {name: getattr(learner, name) for name in OPTIONAL_PARTS}
    optional = {name: part.state_dict() for name, part in parts.items() if part is not None}
    return to_torch_state(
        {
            "scalars": {
                "total_feed": learner.total_feed,
                "labeled_feedback": learner.labeled_feedback,
                "n_rounds": learner.n_rounds,
                "reward_shift": learner.reward_shift,
                "reward_scale": learner.reward_scale,
                "n_envs": learner.store.n_envs,
            },
            "rng": learner.rng.bit_generator.state,
            "eval_rng": learner.eval_rng.bit_generator.state,
            "teacher": learner.teacher.state_dict(),
            "dataset": learner.dataset.state_dict(),
            "store": learner.store.state_dict(),
            "reward_model_n_updates": learner.reward_model.n_updates,
            **optional,
        }
    )


def load_learner_state(learner: Any, state: dict[str, Any]) -> None:
    """Restore what :func:`learner_state` returned into ``learner`` (its teacher as ``learner.restore_teacher`` says)."""
    state = to_numpy_state(state)
    scalars = state["scalars"]
    learner.total_feed = int(scalars["total_feed"])
    learner.labeled_feedback = int(scalars["labeled_feedback"])
    learner.n_rounds = int(scalars["n_rounds"])
    learner.reward_shift = float(scalars["reward_shift"])
    learner.reward_scale = float(scalars["reward_scale"])
    learner.rng.bit_generator.state = state["rng"]
    if "eval_rng" in state:  # saved before the diagnostic had its own stream: it goes on from this seed's
        learner.eval_rng.bit_generator.state = state["eval_rng"]
    restore_teacher(learner.teacher, state["teacher"], learner.restore_teacher)
    learner.dataset.load_state_dict(state["dataset"])
    # Stored segments are laid out per env: a different number of envs starts a fresh store.
    if int(scalars["n_envs"]) == learner.store.n_envs:
        learner.store.load_state_dict(state["store"])
    learner.reward_model.n_updates = int(state["reward_model_n_updates"])
    for name in OPTIONAL_PARTS:
        part = getattr(learner, name)
        if part is not None and name in state:  # a method switched on after the save starts fresh
            part.load_state_dict(state[name])


def restore_teacher(teacher: BaseTeacher, saved: dict[str, Any], mode: str) -> None:
    """
    Load what ``mode`` (one of :data:`RESTORE_TEACHER_MODES`) takes of a saved teacher state into ``teacher``.

    :param teacher: the restored learner's teacher
    :param saved: the saved teacher's ``state_dict()``
    :param mode: how much of it to take
    """
    if mode not in RESTORE_TEACHER_MODES:
        raise ValueError(f"restore_teacher must be one of {list(RESTORE_TEACHER_MODES)}, got {mode!r}")
    if mode == "none":
        return
    if mode == "counters":
        current = teacher.state_dict()
        if set(current) != set(saved):
            return  # not the same kind of teacher: nothing of the saved progress applies
        # Without a saved rng_state the teacher draws nothing at random (e.g. a human): nothing to keep.
        own: dict[str, Any] = {key: current[key] for key in ("config", "rng_state") if key in current}
        saved = {**saved, **own}
    if mode == "progress":
        current = teacher.state_dict()
        if "config" not in current or "config" not in saved:
            return  # not the same kind of teacher: nothing of the saved progress applies
        saved = {**saved, "config": current["config"]}
    teacher.load_state_dict(saved)


__all__ = ["OPTIONAL_PARTS", "RESTORE_TEACHER_MODES", "learner_state", "load_learner_state", "restore_teacher"]
