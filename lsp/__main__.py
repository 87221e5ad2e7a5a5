"""python -m lsp: the language server on stdio (see `rewriter lsp --help`)."""
import sys

from rewriter.cli import main

sys.exit(main(["lsp", *sys.argv[1:]]))
