"""The fault matrix's cells (benchmarks/fault_matrix.py runs them)."""
