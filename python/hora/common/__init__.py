"""hora.common: the framework-neutral half of hora's Python API (Horovod's ``horovod.common``):
its exceptions and the elastic State/run machinery that hora.torch.elastic builds on."""
