"""The HTTP registry baselines (AgentDNS, ANS): HTTP/1.1 and PKI helpers, servers, clients."""
