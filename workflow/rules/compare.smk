# Model-vs-model comparisons (issues 25, 32): every pair of evaluated models on every
# benchmark, on the same pairs; identity-clustered paired bootstrap with a t(G-1) Wald test,
# Holm across every test of the table; leaderboards ranked by the number of models
# significantly better -> results/{ds}/compare/ (any score files: `facecast compare`)
# Which models/benchmarks: facecast.compare.targets (a mitigated model, `dlib+fsn`, reads
# the mitigation stage's transformed scores). Logic: facecast.compare.stage.
import facecast.compare.targets as compare_targets

COMPARE_DIR = compare_targets.COMPARE_DIR


rule compare:
    input:
        lambda wc: list(compare_targets.score_inputs(config, wc.ds).values()),
    output:
        differences=f"{COMPARE_DIR}/differences.parquet",
        differences_csv=f"{COMPARE_DIR}/differences.csv",
        leaderboard=f"{COMPARE_DIR}/leaderboard.parquet",
        leaderboard_csv=f"{COMPARE_DIR}/leaderboard.csv",
        leaderboard_md=f"{COMPARE_DIR}/leaderboard.md",
        html=report(f"{COMPARE_DIR}/report.html", **compare_targets.report_kw("report")),
    params:
        names=lambda wc: list(compare_targets.score_inputs(config, wc.ds)),
        compare=config.get("compare", {}),
        fars=config["evaluate"]["fars"],
        seed=config["seed"],
        accuracy=compare_targets.accuracy(config),
    log:
        "results/{ds}/logs/compare.log",
    benchmark:
        "results/{ds}/runtime/compare.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/compare.py"


DEFAULT_TARGETS.append(lambda ds: compare_targets.targets(config, ds))
