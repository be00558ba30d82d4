"""insightface arcface_torch backbones (and CAST's copies of them), written from their
published descriptions with the official state-dict key names.

- :mod:`~facecast.embed.arcface.iresnet` — iResNet r18, r34, r50, r100, r200
- :mod:`~facecast.embed.arcface.mobilefacenet` — MobileFaceNet mbf, mbf_large
- :mod:`~facecast.embed.arcface.vit` — face ViT vit_t, vit_s, vit_b
- :mod:`~facecast.embed.arcface.weights` — build any arch, read a ``backbone.pth``,
  ``arch: auto`` (the arch from the state dict's keys and shapes)
- :mod:`~facecast.embed.arcface.embedder` — the ``arcface_torch`` embedding backend
"""
