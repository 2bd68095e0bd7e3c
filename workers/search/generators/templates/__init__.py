"""One module per template family, and what they share (``common``)."""
