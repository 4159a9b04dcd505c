"""Scenario -> run plan: namespace, network, hierarchy, registries, workload, faults, churn,
trust.
"""
