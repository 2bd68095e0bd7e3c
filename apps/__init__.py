"""The Django apps of KernelEvolve."""
