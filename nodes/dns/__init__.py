"""DNS nouns shared by every role: wire options and names, codec, messages, zones, DNSSEC,
caches.
"""
