# facecast: fine-grained, attribute-conditioned evaluation of face recognition.
# Layout and artifact flow: see README.md. All logic lives in src/facecast; rules are thin.

from snakemake.utils import min_version, validate

min_version("9.0")


# The default run (the synthetic demo). A --configfile on the command line replaces it
# rather than being deep-merged into it, so your datasets do not drag the demo along.
if not workflow.config_settings.configfiles:

    configfile: "config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")

# Semantic checks (names, columns, files, ranges): every mistake, named by its key path,
# fails here, before any job (facecast.config_check).
from facecast.config_check import check_config

check_config(config)


include: "workflow/rules/common.smk"
include: "workflow/rules/ingest.smk"
include: "workflow/rules/faces.smk"
include: "workflow/rules/embed.smk"
include: "workflow/rules/attributes.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/fairness.smk"
include: "workflow/rules/quality.smk"
include: "workflow/rules/covariates.smk"
include: "workflow/rules/labels.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        all_targets,
