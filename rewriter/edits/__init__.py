"""The edit core every front end shares: scopes, the edit session and pipeline, the integrity
check, hunks, diffs, file I/O. Torch-free."""
