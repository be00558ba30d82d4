# Evaluate: score embedders on verification protocols (mined benchmarks, the dataset's LFW
# pairs.txt as `lfw`, imported CAST .list folders / pairs.txt files, the protocols an
# insightface .bin dataset implies: its file stem, or CC11's eleven blocks) -> scores,
# metrics, ROC/DET; then a models x benchmarks summary, a CC11 table per `layout: cc11`
# dataset and one table of every .bin set. Logic: facecast.evaluate.stage; targets:
# facecast.evaluate.targets (mined benchmarks: facecast.analysis.targets).
# Rerun one benchmark: snakemake results/<ds>/eval/<model>/<bench>.parquet
# Params carry only what each job reads (evaluate.targets.job_config; one import's spec), so
# editing one evaluate.imports entry reruns that protocol's jobs only.
import facecast.analysis.targets as analysis_targets
import facecast.evaluate.targets as eval_targets
from facecast.config.bin_sets import CC11_NAMES


rule import_protocol:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        pairs="results/{ds}/protocols/{proto}.parquet",
    params:
        spec=lambda wc: eval_targets.protocol_spec(config, wc.ds, wc.proto),
        n_folds=config["evaluate"]["n_folds"],
        seed=config["seed"],
    wildcard_constraints:
        proto=eval_targets.import_regex(config),
    log:
        "results/{ds}/logs/evaluate/import_{proto}.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_import.py"


# The eleven block protocols of a CC11 .bin in one job (the file is read once); an import
# of the same name on that dataset yields to the block, as protocol_spec decides.
rule cc11_protocols:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        pairs=expand("results/{{ds}}/protocols/{name}.parquet", name=CC11_NAMES),
    params:
        path=lambda wc: config["datasets"][wc.ds]["path"],
    wildcard_constraints:
        ds=eval_targets.cc11_regex(config),
    log:
        "results/{ds}/logs/evaluate/cc11_protocols.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_cc11_protocols.py"


ruleorder: cc11_protocols > import_protocol


rule evaluate_benchmark:
    input:
        protocol=lambda wc: eval_targets.protocol_path(config, wc.ds, wc.bench),
        embeddings=EMBED_INDEX,
    output:
        scores="results/{ds}/eval/{model}/{bench}.parquet",
        metrics="results/{ds}/eval/{model}/{bench}/metrics.parquet",
        roc="results/{ds}/eval/{model}/{bench}/roc.parquet",
        roc_png=report(
            "results/{ds}/eval/{model}/{bench}/roc.png",
            caption="../report/roc_det.rst",
            category="Evaluation",
            subcategory="{ds} / {bench}",
            labels={"model": "{model}", "plot": "ROC"},
        ),
        det_png=report(
            "results/{ds}/eval/{model}/{bench}/det.png",
            caption="../report/roc_det.rst",
            category="Evaluation",
            subcategory="{ds} / {bench}",
            labels={"model": "{model}", "plot": "DET"},
        ),
    params:
        cfg=eval_targets.job_config(config["evaluate"], config["seed"]),
        out_dir=lambda wc: f"results/{wc.ds}/eval/{wc.model}/{wc.bench}",
    wildcard_constraints:
        bench=eval_targets.protocol_regex(config),
    log:
        "results/{ds}/logs/evaluate/{model}/{bench}.log",
    benchmark:
        "results/{ds}/runtime/evaluate/{model}/{bench}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_benchmark.py"


rule evaluate_summary:
    input:
        metrics=lambda wc: eval_targets.metric_files(config, wc.ds),
    output:
        table="results/{ds}/eval/summary.parquet",
        markdown=report(
            "results/{ds}/eval/summary.md",
            caption="../report/eval_table.rst",
            category="Evaluation",
            subcategory="{ds}",
            labels={"table": "models x benchmarks (Markdown)"},
        ),
        html=report(
            "results/{ds}/eval/summary.html",
            caption="../report/eval_table.rst",
            category="Evaluation",
            subcategory="{ds}",
            labels={"table": "models x benchmarks"},
        ),
    params:
        models=lambda wc: eval_targets.summary_models(config, wc.ds),
        benchmarks=lambda wc: eval_targets.eval_benchmarks(config, wc.ds),
        fars=config["evaluate"]["fars"],
    log:
        "results/{ds}/logs/evaluate/summary.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_summary.py"


rule pair_stats_html:
    input:
        stats="results/{ds}/benchmarks/{bench}/pair_stats.tsv",
    output:
        html=report(
            "results/{ds}/benchmarks/{bench}/pair_stats.html",
            caption="../report/benchmark_pairs.rst",
            category="Benchmarks",
            subcategory="{ds}",
            labels={"benchmark": "{bench}", "file": "pairs per fold (table)"},
        ),
    wildcard_constraints:
        bench=analysis_targets.benchmark_regex(config),
    log:
        "results/{ds}/logs/analysis/pair_stats_html_{bench}.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_pair_stats_html.py"


rule cc11_table:
    input:
        metrics=lambda wc: [it["path"] for it in eval_targets.cc11_items(config, wc.ds)],
    output:
        table="results/{ds}/eval/cc11.parquet",
        markdown=report(
            "results/{ds}/eval/cc11.md",
            caption="../report/cc11_table.rst",
            category="Evaluation",
            subcategory="{ds}",
            labels={"table": "CC11 (Markdown)"},
        ),
        html=report(
            "results/{ds}/eval/cc11.html",
            caption="../report/cc11_table.rst",
            category="Evaluation",
            subcategory="{ds}",
            labels={"table": "CC11"},
        ),
    params:
        entries=lambda wc: eval_targets.cc11_items(config, wc.ds),
        models=eval_targets.eval_models(config),
        source=lambda wc: config["datasets"][wc.ds].get("path", ""),
    log:
        "results/{ds}/logs/evaluate/cc11_table.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_cc11.py"


rule bin_suite:
    input:
        metrics=[it["path"] for it in eval_targets.bin_suite_items(config)],
    output:
        table="results/bin_suite.parquet",
        markdown=report(
            "results/bin_suite.md",
            caption="../report/bin_suite.rst",
            category="Evaluation",
            labels={"table": "verification .bin sets (Markdown)"},
        ),
        html=report(
            "results/bin_suite.html",
            caption="../report/bin_suite.rst",
            category="Evaluation",
            labels={"table": "verification .bin sets"},
        ),
    params:
        entries=eval_targets.bin_suite_items(config),
        models=eval_targets.eval_models(config),
        flips=eval_targets.model_flips(config),
    log:
        "results/logs/evaluate/bin_suite.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_bin_suite.py"


DEFAULT_TARGETS.append(lambda ds: eval_targets.evaluate_targets(config, ds))
DEFAULT_TARGETS.append(lambda ds: eval_targets.cc11_targets(config, ds))
DEFAULT_TARGETS.append(lambda ds: eval_targets.bin_suite_targets(config, ds))
