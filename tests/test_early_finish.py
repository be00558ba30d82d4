"""A run Snakemake ends early but calls a success (snakemake/snakemake#823: group jobs
with checkpoints; seen in the SLURM test) fails loudly instead: the Snakefile's
``onsuccess`` reads the run's last progress line (facecast.workflow_glue)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import REPO

from facecast.workflow_glue import early_finish_message

EARLY = REPO / "tests" / "data" / "snakemake_logs" / "early_finish.log"


def test_the_real_early_finish_is_named_with_its_counts():
    message = early_finish_message(str(EARLY))
    assert message is not None
    assert early_finish_message([str(EARLY)]) == message  # what onsuccess gets: a list
    assert "after 38 of 47 jobs" in message and "the other 9 job(s)" in message
    assert "snakemake/snakemake#823" in message and "run the same command again" in message


def test_a_finished_run_or_no_log_says_nothing(tmp_path):
    done = tmp_path / "done.log"
    done.write_text("5 of 47 steps (11%) done\nFinished jobid: 3\n47 of 47 steps (100%) done\n")
    assert early_finish_message(str(done)) is None
    quiet = tmp_path / "quiet.log"
    quiet.write_text("Nothing to be done (all requested files are present and up to date).\n")
    assert early_finish_message(str(quiet)) is None
    assert early_finish_message(str(tmp_path / "missing.log")) is None
    assert early_finish_message(None) is None
    assert early_finish_message([]) is None and early_finish_message([str(done)]) is None
    # only the last progress line counts: a run that caught up is finished
    late = tmp_path / "late.log"
    late.write_text("46 of 47 steps (98%) done\n47 of 47 steps (100%) done\n")
    assert early_finish_message(str(late)) is None


def test_snakefile_fails_the_run_from_onsuccess(tmp_path):
    """What the Snakefile's onsuccess does with the message: Snakemake exits non-zero and
    prints it (a tiny workflow whose onsuccess reads the real early-finish log)."""
    assert "early_finish_message(log)" in (REPO / "Snakefile").read_text()
    (tmp_path / "Snakefile").write_text(textwrap.dedent(f"""
        rule one:
            output: "one.txt"
            shell: "echo 1 > {{output}}"

        onsuccess:
            from facecast.workflow_glue import early_finish_message
            from snakemake.exceptions import WorkflowError

            raise WorkflowError(early_finish_message({str(EARLY)!r}))
    """))
    run = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "-d",
                          str(tmp_path), "-s", str(tmp_path / "Snakefile")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "Snakemake ended this run after 38 of 47 jobs" in run.stdout + run.stderr
    assert (tmp_path / "one.txt").read_text() == "1\n"  # the outputs written stay
