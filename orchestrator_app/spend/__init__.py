"""The spend page: ``services`` (spend per day by agent, user or schedule, from the ledger)
and ``admin`` (the charts and tables)."""
