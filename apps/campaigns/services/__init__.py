"""Writes for campaigns: problems, campaign lifecycle, search steps, evaluation results."""
