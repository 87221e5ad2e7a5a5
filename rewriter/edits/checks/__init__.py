"""The checks an edit must pass before it is applied: syntax, lint, integrity (and the replacements it allows)."""
