"""Face detection and alignment (stage ``faces``).

Modules, one job each:

- :mod:`facecast.faces.decode` — robust image decoding (EXIF, colour modes, bombs, corrupt files)
- :mod:`facecast.faces.detect` — batched MTCNN detection (facenet-pytorch weights) and face choice
- :mod:`facecast.faces.align` — 5-point ArcFace alignment and facenet margin crops
- :mod:`facecast.faces.crops` — lossless PNG bytes for crops stored in Parquet
- :mod:`facecast.faces.stage` — one manifest shard in, one faces Parquet out
"""
