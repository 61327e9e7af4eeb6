"""The host a measurement runs on: which cores it gets, how malloc behaves, which device runs the work.

Shared by characterization and by measuring tests, so that both see the machine the same way.
"""
