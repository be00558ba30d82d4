"""Procedural synthetic face dataset: the embedded, offline demo of facecast.

:func:`~facecast.datasets.synthetic.generate.generate_dataset` renders colour face images
of ``n_identities`` made-up people, ``images_per_identity`` each, writes them as JPEG to
``out_dir/images/<identity>/<k>.jpg`` and, last, the ground truth table
``out_dir/truth.parquet`` (the rule's output marker).

Everything is drawn with vectorised numpy on a pixel grid (soft signed-distance masks,
a depth map shaded by a Lambertian + specular light), so a few hundred identities take
seconds. Output is a pure function of the seed: each identity and each image has its own
random stream (``SeedSequence([seed, stream, identity, image])``), so images and table are
byte-identical whatever ``n_jobs`` is.

Identity traits (same in every image of a person; ground truth as ``label_*``):
``skin_tone`` (0 light .. 1 dark, uniform), ``male`` (0/1), ``age`` (18..80 years, uniform),
``eye_spacing``, ``nose_width``, ``mouth_width``, ``face_aspect`` (face units: the face
half-width is 1), ``hair_grey`` (0..1, rises with age), ``wrinkles`` (0..1, rises with age),
``beard`` (0/1, men only), ``hair_long`` (0/1), ``bald`` (0/1), ``dark_skin``
(``skin_tone >= 0.5``), plus unlabelled identity cues (hair colour and style, brow shape,
iris colour, jaw taper, eye and lip shape, moles, freckles, and a fixed skin texture that
moves with the face).

Image covariates (per image): ``yaw`` (U(-25, 25) degrees) and ``roll`` (N(0, 7) degrees),
``scale`` (face size relative to a half-width of 0.22 x image size, U(0.8, 1.15)), ``blur``
(Gaussian sigma in pixels of a 224 px image; scaled with the image size), ``noise``
(Gaussian sigma, fraction of full range), ``illumination`` (exposure gain),
``light_direction`` (degrees, negative = light from the image's left), ``jpeg_quality``
(40..95), ``glasses`` (0/1), ``hat`` (0/1), ``smile`` (0..1).

Planted effects that later stages must recover:

1. Glasses rise with age: ``P(glasses) = 1 / (1 + exp(-(age - 50) / 8))`` per image
   (3 % at 22 years, 50 % at 50, 98 % at 80); Pearson corr(age, glasses) is about 0.7.
2. A blur range that lowers recognisability: 70 % of images get mild blur
   (sigma U(0, 0.8) px at 224 px), 30 % strong blur (sigma U(1.5, 3.5) px at 224 px).
3. One protected group gets worse, less consistent captures: dark-skinned women
   (``male == 0`` and ``skin_tone >= 0.5``, ``label_low_contrast_group == 1``, about a
   quarter of identities). Per image, drawn from the image's own stream, *before*
   exposure, blur, the same sensor noise as everyone and JPEG:
   (a) face geometry varies from photo to photo (expression, distance, lens): eye
   spacing and height, mouth width, height and lips, face aspect, nose length and brow
   height each move by N(0, (``GROUP_JITTER`` = 1.6 x the sd of that trait's identity
   law)^2), clipped to the law's range; the ``label_*`` columns keep the identity's values;
   (b) low contrast: in the face the fine detail (image minus its blur at sigma = 1.5 % of
   the size) keeps ``LOW_CONTRAST_FACTOR`` = 0.7 of its contrast
   (``COARSE_CONTRAST_FACTOR`` = 1.0 for the coarse structure), then the whole frame
   (face, hair, outline, background) keeps ``GROUP_CONTRAST`` = 0.8 around its mean colour;
   (c) uneven light: a smooth log-gain field (4 x 4 Gaussian grid, bicubic, sd
   ``SHADING_STRENGTH``) and a white-balance cast (log-gain sd ``COLOUR_CAST`` = 0.06 per
   channel); (d) a low-resolution camera: the frame is resampled to ``GROUP_RESOLUTION``
   = 0.4 of its size and back. Measured with ``SHADING_STRENGTH`` = 0.15 on 80 identities
   x 6 images at 224 px (seed 20231, ``benchmarks/synthetic_detection.py --lbp --dlib``;
   positive-pair AUC = the group's genuine pairs against all impostor pairs): MTCNN found
   0.745 of the group's faces (0.947 of the others); dlib AUC 0.70 for the group vs
   0.77 / 0.89 / 0.89 (dark men / light women / light men). With the current 0.25, on the
   test suite's demo (64 identities x 6 images at 160 px, fair_pool protocol): MTCNN finds
   0.55 of the group's faces (0.94 of the others); dlib AUC 0.63 for the group vs
   0.81 / 0.87 / 0.81, and the FairFace bias metric names the group the most discriminated
   for positive pairs (mean d+ 0.26 vs 0.19 for dark men). The LBP baseline is not
   sensitive to it (AUC 0.69 vs 0.66-0.67: contrast-invariant codes).
4. Low light means more sensor noise: ``illumination`` is U(0.55, 1.25) and
   ``noise = U(0, 0.012) + 0.045 * (1.25 - illumination) / 0.7``, so corr(illumination,
   noise) is about -0.97.
5. Hats are worn more by men: ``P(hat) = 0.25`` for men, ``0.08`` for women.

6. Annotation noise (issue 14, optional ``label_noise``): observed columns
   ``label_noisy_<attr>`` next to the clean ``label_*`` ones, with per-attribute flips,
   one attribute flipped in one group only, an exact planted contradiction rate and one
   identity flipped in every image (see :mod:`facecast.datasets.label_noise`). Only these added
   columns carry noise; images and the clean labels do not change.

Splits: one identity in four (``n_identities // 4``, chosen by a seeded permutation) gets
``split = "train"`` and ``exclude = True`` (it fits the LBP whitening and the attribute
trainer and never enters benchmarks); the rest are ``split = "test"``, ``exclude = False``.

Modules (this package imports none of them, so reading its constants stays cheap):

- :mod:`.sampling`: who the people are and how each photo is taken (the trait and
  covariate laws, the seeded random streams);
- :mod:`.effects`: the planted effects 1-5 (their laws and the group's capture);
- :mod:`.draw` and :mod:`.render`: drawing primitives and the face / camera rendering;
- :mod:`.truth`: label columns, identity names, split and the truth table;
- :mod:`.generate`: :func:`generate_dataset`, which ties them together.
"""
