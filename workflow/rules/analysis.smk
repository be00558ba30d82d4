# Analysis: attribute correlations, CAST benchmark subsets (filters -> subset.parquet +
# description.txt) and C11 hard-pair mining (pairs.parquet, CAST .list files, pairs.txt).
# Logic: facecast.analysis.stage; targets: facecast.analysis.targets.
import facecast.analysis.targets as analysis_targets


# analysis.level: template - an IJB dataset's templates with their images' mean / majority
# attributes (facecast.analysis.template_level); correlations and subsets then read it
rule template_attributes:
    input:
        unpack(lambda wc: analysis_targets.template_attribute_inputs(config, wc.ds)),
    output:
        table=analysis_targets.TEMPLATE_ATTRIBUTES,
    params:
        majority_columns=analysis_targets.analysis_section(config).get("template_majority", []),
        statuses=config["mining"].get("statuses", ["ok"]),
    wildcard_constraints:
        ds=name_regex(analysis_targets.template_level_datasets(config)),
    log:
        "results/{ds}/logs/analysis/template_attributes.log",
    benchmark:
        "results/{ds}/runtime/analysis/template_attributes.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/analysis_template_attributes.py"


rule correlations:
    input:
        attributes=lambda wc: analysis_targets.attribute_table(config, wc.ds),
    output:
        [
            (
                report(
                    path,
                    caption=f"../report/{analysis_targets.CORRELATION_REPORT[kind][0]}.rst",
                    category="Correlations",
                    subcategory="{ds}",
                    labels={"method": method, "figure": analysis_targets.CORRELATION_REPORT[kind][1]},
                )
                if kind in analysis_targets.CORRELATION_REPORT
                else path
            )
            for method, kind, path in analysis_targets.correlation_items(config)
        ],
    params:
        cfg=config["correlations"],
        out_dir=lambda wc: f"results/{wc.ds}/correlations",
    priority: 10  # a long job nothing waits for: started early, not left to the end
    log:
        "results/{ds}/logs/analysis/correlations.log",
    benchmark:
        "results/{ds}/runtime/analysis/correlations.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/analysis_correlations.py"


rule benchmark_subset:
    input:
        attributes=lambda wc: analysis_targets.attribute_table(config, wc.ds),
    output:
        subset="results/{ds}/benchmarks/{bench}/subset.parquet",
        description=report(
            "results/{ds}/benchmarks/{bench}/description.txt",
            caption="../report/benchmark_definition.rst",
            category="Benchmarks",
            subcategory="{ds}",
            labels={"benchmark": "{bench}", "file": "definition"},
        ),
    params:
        filters=lambda wc: config["benchmarks"][wc.bench].get("filters", []),
        rank_method=lambda wc: config["benchmarks"][wc.bench].get("rank_method", "facecast"),
        cast_filters=lambda wc: config["benchmarks"][wc.bench].get("cast_filters", []),
        cast_ties=lambda wc: config["benchmarks"][wc.bench].get("cast_ties", "argsort"),
        statuses=lambda wc: analysis_targets.pool_statuses(config, wc.ds),
    wildcard_constraints:
        bench=analysis_targets.benchmark_regex(config),
        ds=name_regex(IMAGE_DATASETS),
    log:
        "results/{ds}/logs/analysis/subset_{bench}.log",
    benchmark:
        "results/{ds}/runtime/analysis/subset_{bench}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/analysis_subset.py"


# cast_arrays datasets: the same subset and description.txt, filtered on CAST's mapped
# arrays (facecast.analysis.cast_filters), never through a 42M-row attribute table
rule cast_benchmark_subset:
    input:
        unpack(lambda wc: analysis_targets.array_subset_inputs(config, wc.ds)),
    output:
        subset="results/{ds}/benchmarks/{bench}/subset.parquet",
        description=report(
            "results/{ds}/benchmarks/{bench}/description.txt",
            caption="../report/benchmark_definition.rst",
            category="Benchmarks",
            subcategory="{ds}",
            labels={"benchmark": "{bench}", "file": "definition"},
        ),
    params:
        bench_cfg=lambda wc: config["benchmarks"][wc.bench],
        statuses=config["mining"].get("statuses", ["ok"]),
    wildcard_constraints:
        bench=analysis_targets.benchmark_regex(config),
        ds=name_regex(ARRAY_DATASETS),
    threads: 1
    log:
        "results/{ds}/logs/analysis/subset_{bench}.log",
    benchmark:
        "results/{ds}/runtime/analysis/subset_{bench}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/analysis_cast_subset.py"


rule mine_pairs:
    input:
        unpack(
            lambda wc: analysis_targets.mine_inputs(config, wc.ds, wc.bench, EMBED_INDEX)
        ),
    output:
        pairs="results/{ds}/benchmarks/{bench}/pairs.parquet",
        report="results/{ds}/benchmarks/{bench}/mining_report.json",
        stats=report(
            "results/{ds}/benchmarks/{bench}/pair_stats.tsv",
            caption="../report/benchmark_pairs.rst",
            category="Benchmarks",
            subcategory="{ds}",
            labels={"benchmark": "{bench}", "file": "pairs per fold"},
        ),
        scores_png=report(
            "results/{ds}/benchmarks/{bench}/pair_scores.png",
            caption="../report/benchmark_pairs.rst",
            category="Benchmarks",
            subcategory="{ds}",
            labels={"benchmark": "{bench}", "file": "reference scores"},
        ),
        pairs_txt="results/{ds}/benchmarks/{bench}/pairs.txt",
        lists=expand("results/{{ds}}/benchmarks/{{bench}}/{fold}.list",
                     fold=analysis_targets.mining_folds(config)),
    params:
        mining=config["mining"],
        bench_cfg=lambda wc: config["benchmarks"][wc.bench],
        reference_model=analysis_targets.reference_model(config),
        out_dir=lambda wc: f"results/{wc.ds}/benchmarks/{wc.bench}",
        seed=config["seed"],
    wildcard_constraints:
        bench=analysis_targets.benchmark_regex(config),
        ds=name_regex(analysis_targets.image_level_datasets(config)),
    threads: 2
    resources:
        gpu=int(analysis_targets.mining_uses_gpu(config)),
    log:
        "results/{ds}/logs/analysis/mine_{bench}.log",
    benchmark:
        "results/{ds}/runtime/analysis/mine_{bench}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/analysis_mine.py"


# Training subsets of a benchmark's pool (export.train_subsets), one rule per format;
# logic: facecast.analysis.train_subsets.

rule train_subset_recordio:
    input:
        unpack(lambda wc: analysis_targets.train_subset_inputs(config, wc.ds, wc.name)),
    output:
        rec="results/{ds}/train_subsets/{name}/train.rec",
        idx="results/{ds}/train_subsets/{name}/train.idx",
        prop="results/{ds}/train_subsets/{name}/property",
        selection="results/{ds}/train_subsets/{name}/selection.parquet",
        report="results/{ds}/train_subsets/{name}/report.json",
    params:
        cfg=lambda wc: analysis_targets.train_subsets(config)[wc.name],
        seed=config["seed"],
    wildcard_constraints:
        name=analysis_targets.train_subset_regex(config, "recordio"),
    log:
        "results/{ds}/logs/analysis/train_subset_{name}.log",
    benchmark:
        "results/{ds}/runtime/analysis/train_subset_{name}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/train_subset.py"


rule train_subset_list:
    input:
        unpack(lambda wc: analysis_targets.train_subset_inputs(config, wc.ds, wc.name)),
    output:
        lst="results/{ds}/train_subsets/{name}/train.lst",
        selection="results/{ds}/train_subsets/{name}/selection.parquet",
        report="results/{ds}/train_subsets/{name}/report.json",
    params:
        cfg=lambda wc: analysis_targets.train_subsets(config)[wc.name],
        seed=config["seed"],
    wildcard_constraints:
        name=analysis_targets.train_subset_regex(config, "list"),
    log:
        "results/{ds}/logs/analysis/train_subset_{name}.log",
    benchmark:
        "results/{ds}/runtime/analysis/train_subset_{name}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/train_subset.py"


rule train_subset_folder:
    input:
        unpack(lambda wc: analysis_targets.train_subset_inputs(config, wc.ds, wc.name)),
    output:
        images=directory("results/{ds}/train_subsets/{name}/images"),
        selection="results/{ds}/train_subsets/{name}/selection.parquet",
        report="results/{ds}/train_subsets/{name}/report.json",
    params:
        cfg=lambda wc: analysis_targets.train_subsets(config)[wc.name],
        seed=config["seed"],
    wildcard_constraints:
        name=analysis_targets.train_subset_regex(config, "folder"),
    log:
        "results/{ds}/logs/analysis/train_subset_{name}.log",
    benchmark:
        "results/{ds}/runtime/analysis/train_subset_{name}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/train_subset.py"


# Mined benchmarks as insightface verification .bin files (export.bins): one benchmark,
# or consecutive equal blocks as CAST's cc11.bin; logic: facecast.analysis.bins.

rule export_bin:
    input:
        unpack(
            lambda wc: analysis_targets.bin_export_inputs(config, wc.ds, wc.name, FACES_INDEX)
        ),
    output:
        bin=analysis_targets.BIN_EXPORT,
        pairs="results/{ds}/bins/{name}.pairs.parquet",
        meta="results/{ds}/bins/{name}.json",
    params:
        cfg=lambda wc: analysis_targets.bin_exports(config)[wc.name],
        seed=config["seed"],
    wildcard_constraints:
        name=name_regex(list(analysis_targets.bin_exports(config))),
        ds=name_regex(analysis_targets.bin_export_datasets(config)),
    log:
        "results/{ds}/logs/analysis/export_bin_{name}.log",
    benchmark:
        "results/{ds}/runtime/analysis/export_bin_{name}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/export_bin.py"


DEFAULT_TARGETS.append(lambda ds: analysis_targets.analysis_targets(config, ds))
ARRAY_TARGETS.append(lambda ds: analysis_targets.analysis_targets(config, ds))
DEFAULT_TARGETS.append(lambda ds: analysis_targets.train_subset_targets(config, ds))
ARRAY_TARGETS.append(lambda ds: analysis_targets.train_subset_targets(config, ds))
DEFAULT_TARGETS.append(lambda ds: analysis_targets.bin_export_targets(config, ds))
ARRAY_TARGETS.append(lambda ds: analysis_targets.bin_export_targets(config, ds))
