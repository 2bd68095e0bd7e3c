"""Models for registry (filled by its own issue)."""
