"""Figures from results folders (matplotlib)."""
