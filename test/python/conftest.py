"""Shared fixtures for hora.torch's tests. Every rank of a horarun job runs the same tests in
the same order, so the collectives inside them match up across ranks."""

import os

import pytest

import hora.torch as hvd


@pytest.fixture(scope='session')
def world():
    """hora.torch initialised once for the session (a world of one outside horarun)."""
    hvd.init()
    yield hvd
    hvd.shutdown()


def pytest_sessionfinish(session, exitstatus):
    """With HORA_SKIP_IS_77=1 (a test row whose every test needs something absent, such as the
    Horovod archive), a run whose every test was skipped exits 77, which Meson reports as
    skipped rather than passed."""
    if os.environ.get('HORA_SKIP_IS_77') != '1' or exitstatus != 0:
        return
    reporter = session.config.pluginmanager.get_plugin('terminalreporter')
    stats = reporter.stats if reporter else {}
    if stats.get('skipped') and not stats.get('passed') and not stats.get('failed'):
        session.exitstatus = 77
