"""Registry: accepted kernel artifacts, promotion stages, approvals, rollout events."""
