"""The pure admission engine: quota tree, pool assignment, preemption, placement.

No I/O and no wall clock: time is a parameter. See `engine.types` for the contract.
"""
