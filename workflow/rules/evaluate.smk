# Evaluate: score embedders on verification protocols (mined benchmarks, the dataset's LFW
# pairs.txt as `lfw`, imported CAST .list folders / pairs.txt files) -> scores, metrics,
# ROC/DET; then a models x benchmarks summary. Logic: facecast.evaluate.stage; targets:
# facecast.evaluate.targets (mined benchmarks: facecast.analysis.targets).
# Rerun one benchmark: snakemake results/<ds>/eval/<model>/<bench>.parquet
# Params carry only what each job reads (evaluate.targets.job_config; one import's spec), so
# editing one evaluate.imports entry reruns that protocol's jobs only.
import facecast.analysis.targets as analysis_targets
import facecast.evaluate.targets as eval_targets


rule import_protocol:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        pairs="results/{ds}/protocols/{proto}.parquet",
    params:
        spec=lambda wc: eval_targets.imports(config)[wc.proto],
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
        models=eval_targets.eval_models(config),
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


DEFAULT_TARGETS.append(lambda ds: eval_targets.evaluate_targets(config, ds))
