"""Reads of the knowledge base. Visibility is decided once, in `entries` (`entries_visible`
for people, `entries_retrievable` for prompts)."""
