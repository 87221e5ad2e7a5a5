"""The decoding core: models, the speculative decoding loop, verifiers, drafter wiring. Imports torch."""
