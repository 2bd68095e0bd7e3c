"""The problem contract: workloads (cases, weights, tolerance) and, in the sandbox child, the
problem module itself (loading, per-case constants, interpreter scaling, edge cases)."""
