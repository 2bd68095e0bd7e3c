"""Writes to the knowledge base: entries and versions, curation, revalidation, campaign
findings, imports and the starter set. Every change to an entry goes through `entries`."""
