# facecast: fine-grained, attribute-conditioned evaluation of face recognition.
# Layout and artifact flow: see README.md and docs/. All logic lives in src/facecast;
# rules are thin.

import os
import sys

from snakemake.utils import min_version

min_version("9.0")


# The default run (the synthetic demo). A --configfile on the command line replaces it
# rather than being deep-merged into it, so your datasets do not drag the demo along.
if not workflow.config_settings.configfiles:

    configfile: "config.yaml"


# Config in three steps (facecast.config.prepare): whole-section on/off spellings, the
# schema (types, enums, unknown keys, defaults), then defaults derived from what the run
# produces (e.g. fairness groups from the age_gender scorer). The plan says what was
# derived and which stages are skipped, and why.
from facecast.config.prepare import fill_defaults, normalize_config
from facecast.config.schema import SCHEMA, validate_config

_ABSENT = normalize_config(config)
validate_config(config, os.path.join(workflow.basedir, SCHEMA))
PLAN = fill_defaults(config, _ABSENT)
for _line in PLAN:
    print(f"facecast plan: {_line}", file=sys.stderr)

# Semantic checks (names, columns, files, ranges): every mistake, named by its key path,
# fails here, before any job (facecast.config.check and each stage's checks module).
from facecast.config.check import check_config

check_config(config)

# Rule scripts' jobs run as forks of a warm job server on a workstation (off in SLURM
# jobs and with FACECAST_JOB_SERVER=0); this makes the `benchmark:` records follow them
# (facecast.job_server, docs/usage.md "The job server").
from facecast.job_server.benchmarks import follow_served_jobs

follow_served_jobs()


# Snakemake can end a run with group jobs and checkpoints early and call it a success
# (snakemake/snakemake#823): say so and fail instead (facecast.workflow_glue).
onsuccess:
    from facecast.workflow_glue import early_finish_message

    _unfinished = early_finish_message(log)
    if _unfinished:
        from snakemake.exceptions import WorkflowError

        raise WorkflowError(_unfinished)


include: "workflow/rules/common.smk"
include: "workflow/rules/ingest.smk"
include: "workflow/rules/faces.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/attributes.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/fairness.smk"
include: "workflow/rules/templates.smk"
include: "workflow/rules/quality.smk"
include: "workflow/rules/covariates.smk"
include: "workflow/rules/labels.smk"
include: "workflow/rules/slices.smk"
include: "workflow/rules/compare.smk"
include: "workflow/rules/mitigation.smk"
include: "workflow/rules/fairsets.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets,
