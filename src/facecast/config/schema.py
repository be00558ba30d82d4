"""The config schema check: JSON Schema (draft 2020-12) validation that fills defaults.

Step 2 of :mod:`facecast.config.prepare`. It does what ``snakemake.utils.validate`` does
for a config (every ``default`` of the schema is set where the config leaves the key out,
then the config is validated), with two differences a user sees:

- every schema mistake is reported at once, each named by its key path, as one
  :class:`facecast.config.check.ConfigError` (Snakemake's stops at the first);
- the schema is read with libyaml when PyYAML has it. Snakemake reads it with its
  pure-Python loader: about 0.35 CPU s of every Snakemake start, and a SLURM group job
  starts Snakemake once per job it runs.

Only schema-internal references (``#/...``) are resolved, which is all facecast's schema
uses.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from facecast.config.check import ConfigError

#: the schema, relative to the repository (the Snakefile's folder)
SCHEMA = Path("workflow") / "schemas" / "config.schema.yaml"


@functools.lru_cache(maxsize=4)
def _validator(path: str, mtime_ns: int) -> Any:
    """A draft 2020-12 validator of the schema at ``path`` that fills in defaults."""
    from jsonschema import Draft202012Validator, validators

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(path, encoding="utf-8") as fh:
        schema = yaml.load(fh, Loader=loader)  # noqa: S506 (a safe loader)
    check_properties = Draft202012Validator.VALIDATORS["properties"]

    def fill_then_check(validator: Any, properties: dict, instance: Any,
                        schema: dict) -> Iterator[Any]:
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(key, copy.deepcopy(sub["default"]))
        yield from check_properties(validator, properties, instance, schema)

    filling = validators.extend(Draft202012Validator, {"properties": fill_then_check})
    return filling(schema)


def validate_config(config: dict[str, Any], schema: str | os.PathLike = SCHEMA) -> None:
    """Fill ``config`` in place with the schema's defaults and validate it; raise one
    :class:`ConfigError` listing every mistake (``key.path: what is wrong``)."""
    path = os.fspath(schema)
    errors = sorted(_validator(path, os.stat(path).st_mtime_ns).iter_errors(config),
                    key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise ConfigError([f"{'.'.join(map(str, e.absolute_path)) or '(top level)'}: "
                           f"{e.message}" for e in errors])
