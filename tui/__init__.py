"""The operator's Textual app (lands with the TUI issue)."""
