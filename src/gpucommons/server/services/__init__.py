"""Use cases of the control plane. Routers call these; these call the store, engine, ledger, executor."""
