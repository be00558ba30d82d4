"""Face embeddings (stage ``embed``): one module per backend, a registry, the stage.

- :mod:`facecast.embed.base` — the :class:`Embedder` interface, devices, AMP, weight errors
- :mod:`facecast.embed.arcface` — insightface arcface_torch / CAST backbones (iResNet,
  MobileFaceNet, ViT) from a ``backbone.pth``; :mod:`facecast.embed.iresnet` keeps the old names
- :mod:`facecast.embed.facenet` — facenet-pytorch InceptionResnetV1 (VGGFace2 / CASIA)
- :mod:`facecast.embed.dlib_resnet` — dlib's 128-D ResNet (weights in face_recognition_models)
- :mod:`facecast.embed.dlib_dnn` — dlib's ResNet weight file read into torch (its default engine)
- :mod:`facecast.embed.onnx_model` — any ONNX model through onnxruntime
- :mod:`facecast.embed.torchscript_model` — any ``torch.jit.save`` model
- :mod:`facecast.embed.pixels` — crop/mean/std/channel-order preprocessing of onnx and torchscript
- :mod:`facecast.embed.lbp` — weight-free uniform-LBP + Hellinger + PCA-whitening baseline
- :mod:`facecast.embed.registry` — backend name -> embedder, built from a config block
- :mod:`facecast.embed.data` — PNG decoding in threads ahead of the model, pinned memory
- :mod:`facecast.embed.stage` — one faces shard in, one embedding Parquet out; LBP fit
"""
