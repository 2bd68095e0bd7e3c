"""The Django-free compute core of KernelEvolve.

It takes plain data (problem source, candidate source, workload, plan) and returns plain,
JSON-serialisable reports. It imports torch and triton but never Django, so it runs alone on a
GPU host: ``python -m workers evaluate|baseline|search ...``.
"""
