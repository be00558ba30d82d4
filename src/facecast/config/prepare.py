"""Turn the config a user wrote into the config the workflow runs, before any check.

Three steps, in this order (the Snakefile calls them; :func:`resolve_config` does all three
for library users and tests):

1. :func:`normalize_config` - the "off" spellings users write for a whole optional stage
   section (``fairness: false``, ``fairness: off``, ``covariates: none``) become
   ``{enabled: false}``; an empty section (``fairness:``) becomes ``{}``. It also records
   which keys with derived defaults (:data:`DERIVED_KEYS`) the user left out.
2. the JSON-schema validation (:func:`facecast.config.schema.validate_config`), which
   fills the schema's defaults. No schema default names a column only the demo has.
3. :func:`fill_defaults` - each stage whose defaults depend on what the run produces
   (``facecast.<stage>.checks.fill_defaults(config, absent)``) fills the keys the user left
   out, and says in one line what it derived or why it is skipped and which key turns it
   on. These lines are the run's *plan*: printed at parse time and written to
   ``results/<ds>/plan.md`` for each dataset of the config (in the report).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

from facecast import STAGES

#: keys whose default is derived from the run's columns when the user leaves them out
DERIVED_KEYS = ("benchmarks", "fairness.protected", "fairness.legitimate", "fairness.soft_attributes",
                "covariates.covariates", "mitigation.enabled")
#: top-level sections that can be switched off as a whole (they have ``enabled``)
SWITCHABLE = ("fairness", "quality", "demographics", "identification", "covariates",
              "audit", "features", "describe", "templates", "slices", "compare",
              "mitigation", "estimators")
OFF_VALUES = {"off", "none", "false", "no", "disabled", "disable"}
ON_VALUES = {"on", "true", "yes", "enabled", "enable"}


def _lookup(config: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def normalize_config(config: dict[str, Any]) -> set[str]:
    """Rewrite whole-section on/off spellings in place; return the :data:`DERIVED_KEYS`
    the user left out (so their defaults are derived, not the schema's empty ones)."""
    for name in SWITCHABLE:
        if name not in config:
            continue
        value = config[name]
        word = value.strip().lower() if isinstance(value, str) else None
        if value is None:
            config[name] = {}
        elif value is False or word in OFF_VALUES:
            config[name] = {"enabled": False}
        elif value is True or word in ON_VALUES:
            config[name] = {"enabled": True}
    return {key for key in DERIVED_KEYS if not _lookup(config, key)[0]}


def fill_defaults(config: dict[str, Any], absent: set[str]) -> list[str]:
    """Run every stage's ``fill_defaults`` (stage order) on a schema-validated config;
    return the plan lines."""
    lines: list[str] = []
    for stage in STAGES:
        module = f"facecast.{stage}.checks"
        if importlib.util.find_spec(module) is None:
            continue
        fill = getattr(importlib.import_module(module), "fill_defaults", None)
        if fill is not None:
            lines += list(fill(config, absent))
    return lines


def resolve_config(config: dict[str, Any], schema: str) -> list[str]:
    """Normalise, schema-validate (filling defaults) and fill derived defaults of
    ``config`` in place, as the Snakefile does; returns the plan lines. ``schema`` is the
    path of ``workflow/schemas/config.schema.yaml``."""
    from facecast.config.schema import validate_config

    absent = normalize_config(config)
    validate_config(config, schema)
    return fill_defaults(config, absent)
