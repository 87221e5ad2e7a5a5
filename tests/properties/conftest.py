"""The properties run on one thread: their tiny models gain nothing from more, and a busy machine
makes threads wait on each other."""
from __future__ import annotations

# The sampling tests' autouse fixture: imported here, it applies to every module below.
from tests.helpers.sampling import one_thread  # noqa: F401
