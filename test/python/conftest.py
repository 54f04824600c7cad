"""Shared fixtures for hora.torch's tests. Every rank of a horarun job runs the same tests in
the same order, so the collectives inside them match up across ranks."""

import pytest

import hora.torch as hvd


@pytest.fixture(scope='session')
def world():
    """hora.torch initialised once for the session (a world of one outside horarun)."""
    hvd.init()
    yield hvd
    hvd.shutdown()
