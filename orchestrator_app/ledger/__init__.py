"""The ledger: what runs spent and did.

``usage`` records each model call (tokens, cost, the daily limit); ``diagnostics`` bundles a
session's state, environment and trace for support.
"""
