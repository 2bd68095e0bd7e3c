"""Models for knowledge (filled by its own issue)."""
