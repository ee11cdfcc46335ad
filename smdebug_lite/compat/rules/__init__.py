"""Modules under ``smdebug.rules`` that smdebug-lite's own ``rules`` package does not have."""
