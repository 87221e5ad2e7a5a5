"""Helpers the test modules share: models, editors, servers, the CLI."""
