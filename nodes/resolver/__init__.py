"""The recursive resolver (sans-IO): core, caches, Algorithm 1's walk, stock iteration,
validation, stub clients.
"""
