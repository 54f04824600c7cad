"""hora: Horovod's APIs on hora's runtime (libhora). See hora.torch."""

__version__ = '0.1.0'
