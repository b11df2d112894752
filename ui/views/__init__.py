"""Operator console views: thin functions that parse input, call a selector, render."""
