"""`rewriter apply`: the files named, their spans planned and rewritten through the edit core
(rewriter/edits/), the diffs, writes (strict reads, atomic writes) and report. Torch-free."""
