"""What an answer does to the user's files: scopes, the integrity check, hunks, diffs, file I/O,
batch rewrites. Torch-free."""
