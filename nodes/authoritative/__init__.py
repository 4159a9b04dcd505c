"""The authoritative server (sans-IO): zone state built at load, answers, transfers, fitting to
UDP/TCP, zone files.
"""
