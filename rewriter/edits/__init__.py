"""The edit core every front end shares: targets and scopes, the edit session and pipeline, hunks;
the checks an edit must pass (checks/) and the snippet merge (snippets/). Torch-free."""
