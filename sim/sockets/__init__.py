"""Real sockets for the live engines (asyncio UDP/TCP endpoints, DNS over TLS) and `tooldns
serve`.
"""
