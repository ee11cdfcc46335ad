"""Submodules of ``smdebug.rules.action`` (the package itself is ``smdebug_lite.rules.action``)."""
