"""Benchmarks: speed, edit correctness with tests, and the integrity check on real answers."""
