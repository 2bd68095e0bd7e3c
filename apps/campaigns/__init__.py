"""Campaigns: problems, workloads, campaigns, the search graph, gate results, live updates."""
