"""Models for campaigns (filled by the search issue)."""
