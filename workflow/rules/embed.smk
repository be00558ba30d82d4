# Embed: one job per faces shard per model -> results/{ds}/embed/{model}/{shard}.parquet.
# Fitted backends (lbp) first fit a per-dataset whitening on the train split (embed_fit).
# Logic: facecast.embed.stage (embed_shard, fit_model); DAG side: facecast.embed.targets.
# Output columns: docs/CONTRACTS.md.
import facecast.embed.targets as embed_targets

EMBED = config["embed"]
EMBED_MODELS = embed_targets.models(config)


wildcard_constraints:
    model=embed_targets.model_regex(config),


rule embed_fit:
    input:
        manifest=lambda wc: datasets_targets.faces_manifest(config, wc.ds),
        faces=FACES_INDEX,
    output:
        fit="results/{ds}/embed/{model}/fit.npz",
    params:
        model=lambda wc: EMBED_MODELS[wc.model],
        embed=EMBED,
    threads: EMBED["threads"]
    log:
        "results/{ds}/logs/embed/{model}/fit.log",
    benchmark:
        "results/{ds}/runtime/embed/{model}/fit.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/embed_fit.py"


rule embed:
    input:
        unpack(
            lambda wc: embed_targets.embed_shard_inputs(
                wc.ds, wc.shard, wc.model, EMBED_MODELS[wc.model]
            )
        ),
    output:
        embeddings="results/{ds}/embed/{model}/{shard}.parquet",
    params:
        model=lambda wc: EMBED_MODELS[wc.model],
        embed=EMBED,
    threads: lambda wc: embed_targets.job_threads(EMBED_MODELS[wc.model], EMBED)
    resources:
        gpu=lambda wc: int(embed_targets.uses_cuda(EMBED_MODELS[wc.model], EMBED["device"])),
    log:
        "results/{ds}/logs/embed/{model}/{shard}.log",
    benchmark:
        "results/{ds}/runtime/embed/{model}/{shard}.tsv"
    conda:
        "../../envs/gpu.yaml" if EMBED["device"] == "cuda" else "../../envs/cpu.yaml"
    script:
        "../../scripts/embed.py"


rule embed_index:
    input:
        shards=lambda wc: per_shard("results/{ds}/embed/{model}/{shard}.parquet", wc.ds,
                                    model=wc.model),
    output:
        index=EMBED_INDEX,
    log:
        "results/{ds}/logs/embed/{model}/index.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/shard_index.py"


DEFAULT_TARGETS.append(lambda ds: embed_targets.default_targets(config, ds))
