"""Fixtures of the hetero_comm PyTorch backend suite: private daemons, and the decision to skip.

The suite skips itself, saying why, when torch cannot be imported by this interpreter or when
the build has no python/hetero_comm yet. HC_TEST_BACKENDS=gloo runs only the Gloo half, which
checks the suite's own expectations without the hetero backend.
"""
import shutil
import sys
import tempfile

import pytest

import hc_harness

BACKENDS = hc_harness.selected_backends()
WHY_SKIPPED = hc_harness.why_unavailable(BACKENDS)
# Rank processes get this through the harness; the pytest process needs it for the zero-copy
# helpers and for reporting.
if str(hc_harness.python_dir()) not in sys.path:
    sys.path.insert(0, str(hc_harness.python_dir()))


def pytest_report_header(config):
    state = f"skipped: {WHY_SKIPPED}" if WHY_SKIPPED else "will run"
    return (f"hetero_comm suite: build dir {hc_harness.build_dir()}, backends "
            f"{','.join(BACKENDS)}; {state}")


def pytest_collection_modifyitems(config, items):
    if WHY_SKIPPED:
        mark = pytest.mark.skip(reason=WHY_SKIPPED)
        for item in items:
            item.add_marker(mark)


def pytest_terminal_summary(terminalreporter):
    if WHY_SKIPPED:
        terminalreporter.write_line(f"tests/python skipped: {WHY_SKIPPED}", yellow=True)
    if hc_harness._scratch and (terminalreporter.stats.get("failed")
                                or terminalreporter.stats.get("error")):
        terminalreporter.write_line(f"daemon and rank logs kept in {hc_harness._scratch}")


def pytest_sessionfinish(session, exitstatus):
    if hc_harness._scratch and exitstatus == 0:
        shutil.rmtree(hc_harness._scratch, ignore_errors=True)


def _daemons(count):
    workdir = tempfile.mkdtemp(prefix=f"daemons{count}-", dir=hc_harness.scratch_root())
    daemons = hc_harness.Daemons(count, workdir).start()
    yield daemons
    codes = daemons.stop()
    if any(code != 0 for code in codes):
        pytest.fail(f"hetero-commd exit statuses after SIGTERM: {codes}\n{daemons.log_text()}")


@pytest.fixture(scope="module")
def one_daemon():
    """One daemon: a single node."""
    yield from _daemons(1)


@pytest.fixture(scope="module")
def two_daemons():
    """Two daemons on 127.0.0.1 reaching each other over TCP: two nodes."""
    yield from _daemons(2)

