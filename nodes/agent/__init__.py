"""Client agents: the stub agent and the session layer (seed 003) above it."""
