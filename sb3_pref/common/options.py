"""
The preference options of ``PPO_REWARD``, ``SAC_REWARD`` and ``RL2``, each declared once in
:data:`PREFERENCE_OPTIONS` (name, type, default, check and documentation line; the table lives in
:mod:`sb3_pref.common.option_table` and is re-exported here). Everything else is derived from it, here:

- the checks run on construction and again on ``load`` (:func:`check_options`, :func:`check_option_combinations`);
- the attributes the algorithm stores them in (saved with SB3's data, so they survive ``save``/``load``);
- the ``:param`` lines of the algorithms' docstrings (:func:`document_options`);
- the arguments handed to :class:`~sb3_pref.core.learner.PreferenceLearner` (``learner_arg``);
- the options an off-policy algorithm refuses, and those that only mean something with a reward model;
- which B-Pref flags ``sb3_pref.experiments.bpref`` passes on (:func:`bpref_options`).

The algorithms keep explicit SB3-style signatures (read by users, IDEs and type checkers); ``tests/test_options.py``
checks that their names, types and defaults are the ones declared.

Adding an option: see :mod:`sb3_pref.common.option_table`.
"""

import inspect
import textwrap
from collections.abc import Mapping
from typing import Any, Callable, TypeVar

from sb3_pref.common.option_table import (
    BOTH,
    OFF_POLICY,
    ON_POLICY,
    OPTIONS_BY_NAME,
    PREFERENCE_OPTIONS,
    PreferenceOption,
)

# Importable from here as before the table had its own module (not part of __all__, as before).
from sb3_pref.common.option_table import Check as Check
from sb3_pref.common.option_table import Option as Option
from sb3_pref.common.option_table import as_given as as_given

#: Where an algorithm's docstring lists its preference options (replaced by :func:`document_options`).
DOCS_MARKER = "(then the preference options, declared in sb3_pref.common.options: see help() or the table of the API page)"

_Class = TypeVar("_Class", bound=type)
_Function = TypeVar("_Function", bound=Callable[..., None])


def options_of(family: str) -> tuple[PreferenceOption, ...]:
    """:param family: ``ON_POLICY`` or ``OFF_POLICY``; :return: the options its algorithms take, in declaration order"""
    return tuple(option for option in PREFERENCE_OPTIONS if family in option.families)


def option_defaults(family: str) -> dict[str, Any]:
    """Every declared option's default for ``family`` (also those it does not take: the attributes exist in both)."""
    return {option.name: option.default_for(family) for option in PREFERENCE_OPTIONS}


def check_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """
    Check each given option on its own, before anything is changed.

    :param values: option values by name (declared names only; others are ignored)
    :return: the checked, normalised values by name
    """
    return {
        option.name: option.check(option.name, values[option.name]) for option in PREFERENCE_OPTIONS if option.name in values
    }


def check_option_combinations(values: Mapping[str, Any]) -> None:
    """
    The checks between options (after :func:`check_options`): segment length against episode length, and the
    reference samples against the reference policy.

    :param values: every option's checked value by name
    """
    size_segment, max_ep_len, reward_model = values["size_segment"], values["max_ep_len"], values["reward_model"]
    if size_segment is not None and max_ep_len is not None and size_segment > max_ep_len:
        raise ValueError(f"size_segment={size_segment} is longer than max_ep_len={max_ep_len}: lower size_segment")
    if reward_model is not None:
        # (max_feed against mb_size is checked by the learner, after the spaces: the more basic mistake first.)
        segment = size_segment if size_segment is not None else reward_model.size_segment
        if max_ep_len is not None and segment > max_ep_len:
            raise ValueError(f"reward_model.size_segment={segment} is longer than max_ep_len={max_ep_len}: lower size_segment")
    # (on-policy options: absent from an off-policy algorithm's values)
    if values.get("normalize_reward_samples") == "reference" and values.get("reference_policy") is None:
        raise ValueError("normalize_reward_samples='reference' needs a reference_policy (e.g. reference_policy='initial')")


def refuse_other_family(values: Mapping[str, Any], family: str, algorithm: str) -> None:
    """
    An option of the other family given with a value other than its default is refused, not silently ignored
    (an off-policy algorithm reads the on-policy options at their defaults).

    :param values: the given option values by name
    :param family: the algorithm's family
    :param algorithm: the algorithm's class name, for the message
    """
    for option in PREFERENCE_OPTIONS:
        if family in option.families or option.name not in values:
            continue
        value = values[option.name]
        if value is not option.default and value != option.default:
            kind, other = ("an on-policy", "PPO_REWARD") if ON_POLICY in option.families else ("an off-policy", "SAC_REWARD")
            raise ValueError(
                f"{option.name}={value!r} is {kind} option (it acts on a rollout's KL penalty, whitening, value head "
                f"or epochs, or on a replay buffer) that {algorithm} does not support: leave it at {option.default!r}, "
                f"or use {other}"
            )


def learner_options(algorithm: Any) -> dict[str, Any]:
    """:param algorithm: an algorithm holding the options; :return: the :class:`PreferenceLearner` arguments they set"""
    return {option.learner_arg: getattr(algorithm, option.name) for option in PREFERENCE_OPTIONS if option.learner_arg}


def bpref_options(flags: Any, model: bool = True) -> dict[str, Any]:
    """
    The options a B-Pref run sets from its flags (a flag the namespace lacks leaves the option's default).

    :param flags: the parsed B-Pref flags (``argparse.Namespace``)
    :param model: with a reward model; False leaves out the options that need one
    :return: option values by name
    """
    return {
        option.name: getattr(flags, option.bpref_flag)
        for option in PREFERENCE_OPTIONS
        if option.bpref_flag is not None and hasattr(flags, option.bpref_flag) and (model or not option.model_only)
    }


def options_signature(family: str) -> inspect.Signature:
    """``(self, *args, <the family's options, keyword-only>, **kwargs)``: what ``help`` shows of a mixin's ``__init__``."""
    kinds = inspect.Parameter
    parameters = [
        kinds("self", kinds.POSITIONAL_OR_KEYWORD),
        kinds("args", kinds.VAR_POSITIONAL, annotation=Any),
        *(
            kinds(option.name, kinds.KEYWORD_ONLY, default=option.default_for(family), annotation=option.annotation)
            for option in options_of(family)
        ),
        kinds("kwargs", kinds.VAR_KEYWORD, annotation=Any),
    ]
    return inspect.Signature(parameters, return_annotation=None)


def takes_options(family: str) -> Callable[[_Function], _Function]:
    """
    A decorator for a mixin's ``__init__(self, *args, **kwargs)``: ``help`` and ``inspect.signature`` show the
    options it takes by name, with their types and defaults (:func:`options_signature`).
    """

    def decorate(init: _Function) -> _Function:
        described: Any = init  # a function object takes the attribute; its declared type does not list it
        described.__signature__ = options_signature(family)
        return init

    return decorate


def option_doc_lines(family: str, width: int = 110) -> list[str]:
    """The ``:param`` lines of ``family``'s options (continuation lines indented by 4), unindented."""
    lines: list[str] = []
    for option in options_of(family):
        lines += textwrap.wrap(f":param {option.name}: {option.doc}", width, subsequent_indent="    ")
    return lines


def document_options(family: str) -> Callable[[_Class], _Class]:
    """
    A class decorator: the line :data:`DOCS_MARKER` of the class docstring becomes the ``:param`` lines of
    ``family``'s options, so that ``help()`` and the API pages list them from their one declaration.
    """

    def decorate(cls: _Class) -> _Class:
        doc = cls.__doc__ or ""
        for line in doc.splitlines():
            if line.strip() == DOCS_MARKER:
                indent = line[: len(line) - len(line.lstrip())]
                generated = "\n".join(indent + text for text in option_doc_lines(family))
                cls.__doc__ = doc.replace(line, generated, 1)
                return cls
        raise ValueError(f"{cls.__name__}'s docstring lacks the line {DOCS_MARKER!r} where its options are listed")

    return decorate


def passed_on(arguments: dict[str, Any], *own: str) -> dict[str, Any]:
    """
    An ``__init__``'s arguments (its ``locals()`` on entry), to hand on to ``super().__init__`` by name.

    :param arguments: ``locals()`` taken first thing in ``__init__``
    :param own: the arguments the class consumes itself
    :return: every argument but ``self``, the class cell ``super()`` uses, and ``own``
    """
    return {name: value for name, value in arguments.items() if name not in ("self", "__class__", *own)}


__all__ = [
    "BOTH",
    "DOCS_MARKER",
    "OFF_POLICY",
    "ON_POLICY",
    "OPTIONS_BY_NAME",
    "PREFERENCE_OPTIONS",
    "PreferenceOption",
    "bpref_options",
    "check_option_combinations",
    "check_options",
    "document_options",
    "learner_options",
    "option_defaults",
    "option_doc_lines",
    "options_of",
    "options_signature",
    "passed_on",
    "refuse_other_family",
    "takes_options",
]
