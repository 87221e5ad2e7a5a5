"""Helpers (no tests): how CI's two pytest workers share the tests; a module of its own, light
to import, so that tests/test_ci_workers.py can try the hook in a pytest of its own."""
import pytest


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Groups for `pytest -n 2 --dist loadgroup` (CI): the real-model tests run one after another
    on one worker, since two at once would each have half the cores and the memory of two models;
    the rest go a module at a time, so a module's fixtures are built once."""
    for item in items:
        group = "real_model" if item.get_closest_marker("real_model") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
