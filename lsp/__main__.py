"""python -m lsp: the language server, without the CLI's imports (starts faster); same as `rewriter lsp`."""
import sys

from .server import main

sys.exit(main())
