# Slice discovery (issues 25, 33): attribute slices where a model errs most on FNMR and
# FMR, identity-clustered tests and false-discovery control, grouped into a short list of
# findings, each exported as a benchmark definition
#   -> results/{ds}/slices/{model}/{protocol}/
# Which models/protocols (config section slices): facecast.slices.targets. A mitigated
# model (`dlib+fsn`) reads the mitigation stage's transformed scores.
# Logic: facecast.slices.stage.run_slices.
import facecast.slices.targets as slices_targets

SLICES_DIR = slices_targets.SLICES_DIR


rule slices:
    input:
        scores=lambda wc: slices_targets.scores_input(wc.ds, wc.model, wc.protocol),
        attributes="results/{ds}/attributes.parquet",
        faces=lambda wc: [] if wc.ds in SCORE_DATASETS else FACES_INDEX.format(ds=wc.ds),
    output:
        parquet=f"{SLICES_DIR}/slices.parquet",
        csv=f"{SLICES_DIR}/slices.csv",
        findings=f"{SLICES_DIR}/findings.parquet",
        findings_csv=f"{SLICES_DIR}/findings.csv",
        discovered=f"{SLICES_DIR}/discovered.yaml",
        search=f"{SLICES_DIR}/search.json",
        html=report(f"{SLICES_DIR}/report.html", **slices_targets.report_kw("findings")),
        png=report(f"{SLICES_DIR}/slices.png", **slices_targets.report_kw("error rates")),
        examples=report(
            f"{SLICES_DIR}/examples.png", **slices_targets.report_kw("finding examples")
        ),
    wildcard_constraints:
        model=r"[^/]+",
        protocol=r"[^/]+",
    params:
        slices=config.get("slices", {}),
        statuses=(config.get("mining") or {}).get("statuses", ["ok", "aligned_input"]),
        seed=config["seed"],
        accuracy=lambda wc: slices_targets.accuracy_config(config, [wc.model]),
    log:
        "results/{ds}/logs/slices/{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/slices/{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/slices.py"


DEFAULT_TARGETS.append(lambda ds: slices_targets.targets(config, ds))
