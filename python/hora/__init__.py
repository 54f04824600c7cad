"""hora: Horovod's APIs on hora's runtime (libhora). See hora.torch."""

__version__ = '0.1.0'

from hora.runner import run  # noqa: E402 (horovod.run's counterpart; no torch needed)
