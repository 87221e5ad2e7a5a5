"""The HTTP service (rewriter serve), its worker engine and protocol, and the client that talks to it."""
