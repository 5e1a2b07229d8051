"""The test modules' asserts rewritten once a run, before xdist's workers start.

pytest rewrites each test module's asserts as it imports it, and keeps the result in the
module's __pycache__. xdist's workers each collect every module, all at the same moment: where
__pycache__ holds none (a fresh clone, a module just changed), each worker rewrote each module
itself, 2.6 s of CPU for all of them, six times over on two cores. The controller, which
collects nothing, now writes the missing ones first; the workers find them.

pytest has no public call for it: these are the functions its import hook uses
(`AssertionRewritingHook.exec_module`). tests/test_tiers.py checks that the workers' hook
takes what this writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _pytest.assertion import assertstate_key
from _pytest.assertion.rewrite import (
    PYC_TAIL,
    _read_pyc,
    _rewrite_test,
    _write_pyc,
    get_cache_dir,
    try_makedirs,
)

TESTS = Path(__file__).resolve().parent


def rewrite_before_the_workers(config: pytest.Config) -> None:
    """Each test module's rewritten form written, where missing, in the controller of a run
    on xdist's workers; nothing in a worker, in a run without workers, or where pytest
    rewrites nothing or writes no bytecode."""
    controller = bool(config.getoption("numprocesses", None)) and not hasattr(config, "workerinput")
    rewriting = config.getoption("assertmode") == "rewrite" and not sys.dont_write_bytecode
    if not (controller and rewriting):
        return
    state = config.stash[assertstate_key]
    for module in sorted(TESTS.glob("test_*.py")):
        cache = get_cache_dir(module)
        pyc = cache / (module.name[:-3] + PYC_TAIL)
        if _read_pyc(module, pyc, state.trace) is None and try_makedirs(cache):
            source_hash, code = _rewrite_test(module, config)
            _write_pyc(state, code, source_hash, pyc)
            state.trace(f"rewritten before the workers start: {module}")
