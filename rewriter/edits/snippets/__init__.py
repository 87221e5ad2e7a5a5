"""The snippet merge: a snippet with markers for unchanged code merged into its file without a model."""
