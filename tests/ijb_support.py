"""A tiny IJB release in insightface's layout, built from the Yale photos in tests/data.

Five subjects x four photos: per subject template ``2s+1`` holds normal (media 1) and
glasses (media 2), template ``2s+2`` leftlight and surprised (one media, 3). One extra
image line names a file that is not there (its template keeps three images). Landmarks
are the same five points for every photo (the Yale faces are centred and frontal). The
1:N CSVs put the first templates of subjects 2-4 in G1, of 5-6 in G2, and every second
template in the mixed probe set. ``empty_template=True`` adds template 99 whose only image
line names a missing file (a template without an ok image; in no pair).
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

YALE = Path(__file__).parent / "data" / "yale"
LANDMARKS = "130.0 105.0 190.0 105.0 160.0 140.0 137.0 175.0 183.0 175.0"


def write_ijb(root: Path, *, one_n: bool = True, variant: str = "ijbc",
              empty_template: bool = False) -> Path:
    """Write the layout under ``root``; return it."""
    (root / "loose_crop").mkdir(parents=True, exist_ok=True)
    (root / "meta").mkdir(exist_ok=True)
    tid_lines, lm_lines = [], []
    subjects = sorted(p.name for p in YALE.iterdir() if p.is_dir())
    k = 0
    for s, subj in enumerate(subjects):
        for cond, tid, mid in (("normal", 2 * s + 1, 10 * s + 1), ("glasses", 2 * s + 1, 10 * s + 2),
                               ("leftlight", 2 * s + 2, 10 * s + 3),
                               ("surprised", 2 * s + 2, 10 * s + 3)):
            k += 1
            name = f"{k}.jpg"
            Image.open(YALE / subj / f"{cond}.gif").convert("RGB").save(
                root / "loose_crop" / name, quality=92)
            tid_lines.append(f"{name} {tid} {mid}")
            lm_lines.append(f"{name} {LANDMARKS} {0.5 + 0.1 * (k % 5):.2f}")
    tid_lines.append("999.jpg 1 1")  # listed, but no such file
    lm_lines.append(f"999.jpg {LANDMARKS} 0.90")
    if empty_template:
        tid_lines.append("998.jpg 99 99")  # the template's one image is not there
        lm_lines.append(f"998.jpg {LANDMARKS} 0.80")
    (root / "meta" / f"{variant}_face_tid_mid.txt").write_text("\n".join(tid_lines) + "\n")
    (root / "meta" / f"{variant}_name_5pts_score.txt").write_text("\n".join(lm_lines) + "\n")
    n_t = 2 * len(subjects)
    pairs = [f"{a} {b} {int((a - 1) // 2 == (b - 1) // 2)}"
             for a in range(1, n_t + 1) for b in range(a + 1, n_t + 1)]
    (root / "meta" / f"{variant}_template_pair_label.txt").write_text("\n".join(pairs) + "\n")
    if one_n:
        head = "TEMPLATE_ID,SUBJECT_ID,FILENAME\n"
        g1 = [(2 * s + 1, s + 2) for s in range(3)]
        g2 = [(2 * s + 1, s + 2) for s in range(3, len(subjects))]
        probe = [(2 * s + 2, s + 2) for s in range(len(subjects))]
        for name, rows in (("G1", g1), ("G2", g2)):
            (root / "meta" / f"{variant}_1N_gallery_{name}.csv").write_text(
                head + "".join(f"{t},{s},img/{t}.jpg\n" for t, s in rows))
        (root / "meta" / f"{variant}_1N_probe_mixed.csv").write_text(
            head + "".join(f"{t},{s},frames/{t}.png\n" for t, s in probe))
    return root
