"""Next-edit suggestions: from the user's recent edits and the cursor, the model rewrites a window
of lines around the cursor, with the window itself as the prediction."""
