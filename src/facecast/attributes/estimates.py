"""Which scorer columns estimate an attribute facecast groups people by, and the truth
label each one is checked against (the estimator report of the ``labels`` stage, the
estimator trust of the ``fairness`` stage).

An :class:`Estimate` reads one scorer's columns as one attribute:

- ``probability``: one column P(positive); ``>= 0.5`` is ``classes[1]`` (the argmax of a
  two-class output), else ``classes[0]``;
- ``argmax``: one probability column per class; the class of the largest (ties: the
  first listed) is the estimate;
- ``years``: an age in years (binned by the reader, e.g. FairFace's bins).

Class names are spelled as the truth labels of the attribute benchmarks are
(:mod:`facecast.datasets.fairface`): ``Male`` / ``Female``, FairFace's age bins and races.
No model is imported here (the Snakefile's checks read these constants).
"""

from __future__ import annotations

from dataclasses import dataclass

FAIRFACE_RACE_CLASSES = ("White", "Black", "Latino_Hispanic", "East Asian",
                         "Southeast Asian", "Indian", "Middle Eastern")
FAIRFACE_AGE_CLASSES = ("0-2", "3-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69",
                        "more than 70")
#: the fairface scorer's columns (:data:`facecast.attributes.heads.FAIRFACE_COLUMNS`),
#: in the order of the classes above
FAIRFACE_RACE_COLUMNS = ("fairface_white", "fairface_black", "fairface_latino_hispanic",
                         "fairface_east_asian", "fairface_southeast_asian",
                         "fairface_indian", "fairface_middle_eastern")
FAIRFACE_AGE_COLUMNS = ("fairface_0-2", "fairface_3-9", "fairface_10-19", "fairface_20-29",
                        "fairface_30-39", "fairface_40-49", "fairface_50-59",
                        "fairface_60-69", "fairface_70+")
GENDER_CLASSES = ("Female", "Male")


@dataclass(frozen=True)
class Estimate:
    """One scorer's estimate of one attribute (see the module docstring)."""

    estimator: str
    attribute: str
    kind: str
    columns: tuple[str, ...]
    classes: tuple[str, ...] = ()


ESTIMATES = (
    Estimate("age_gender", "gender", "probability", ("age_gender_male",), GENDER_CLASSES),
    Estimate("age_gender", "age", "years", ("age_gender_age",)),
    Estimate("fairface", "gender", "argmax", ("fairface_female", "fairface_male"),
             GENDER_CLASSES),
    Estimate("fairface", "age", "argmax", FAIRFACE_AGE_COLUMNS, FAIRFACE_AGE_CLASSES),
    Estimate("fairface", "race", "argmax", FAIRFACE_RACE_COLUMNS, FAIRFACE_RACE_CLASSES),
    Estimate("celeba40", "gender", "probability", ("Male",), GENDER_CLASSES),
)

#: a single estimate column -> the truth label column a grouping of it is checked
#: against (the same bins applied to both): P(male) -> label_male, age -> label_age
TRUTH_OF_COLUMN = {"age_gender_male": "label_male", "fairface_male": "label_male",
                   "Male": "label_male", "age_gender_age": "label_age"}


def estimates_in(columns: set[str] | list[str]) -> list[Estimate]:
    """The estimates whose every column is among ``columns`` (registry order)."""
    have = set(columns)
    return [e for e in ESTIMATES if all(c in have for c in e.columns)]
