"""Rule synthetic_dataset: render the procedural demo face dataset.

The work sits under the main guard: rendering runs in worker processes, which re-run this
file's top level (see :mod:`facecast.parallel`).
"""

from pathlib import Path

from facecast.workflow_glue import script_context

if __name__ == "__main__":
    with script_context(snakemake) as ctx:
        from facecast.datasets.stage import DEMO_LABEL_NOISE, generate_dataset

        options = {k: v for k, v in snakemake.params.synthetic.items() if k != "seed"}
        options.setdefault("label_noise", DEMO_LABEL_NOISE)  # issue 14: planted annotation noise
        generate_dataset(
            Path(snakemake.output.truth).parent,
            seed=int(snakemake.params.seed),
            n_jobs=ctx.threads,
            provenance=ctx.provenance,
            **options,
        )
