"""watch stage."""
