"""The HTTP service (rewriter serve), its worker engine and protocol. The engine that talks to it
(or to any OpenAI-compatible endpoint) is rewriter/remote.py."""
