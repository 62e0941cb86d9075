"""
What a person can answer on the labelling page, and the label each answer becomes.

Separate from :mod:`sb3_pref.human.store` because it is the vocabulary every side of the page speaks,
not storage: the app checks a request's answer against it, the teacher turns answers into labels (and
a scripted teacher's labels into answers) with it, and the store checks what it is given.
"""

import math

#: What a person can answer, and the label each answer becomes (1.0 = the right clip, ``seg_1``, preferred).
CHOICE_LABELS: dict[str, float] = {"left": 0.0, "right": 1.0, "equal": 0.5, "skip": math.nan}


def label_to_choice(label: float) -> str:
    """:return: the answer a label stands for (``NaN`` is ``"skip"``)"""
    if math.isnan(label):
        return "skip"
    for choice, value in CHOICE_LABELS.items():
        if value == label:
            return choice
    raise ValueError(f"label {label} is not one of 0.0 (left), 1.0 (right), 0.5 (equal) or NaN (skip)")
