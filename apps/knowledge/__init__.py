"""Knowledge: entries with provenance, versions, visibility; retrieval for generators."""
