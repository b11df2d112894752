"""The operator console: server-rendered pages over the memory store (HTMX-enhanced)."""
