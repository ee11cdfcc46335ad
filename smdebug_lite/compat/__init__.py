"""Modules smdebug 1.0.34 exposed outside smdebug-lite's own layout (``smdebug.core.*`` and a few
framework helpers), as a thin layer over smdebug_lite.

``import smdebug.X`` is served by ``smdebug_lite.X`` when it exists and by
``smdebug_lite.compat.X`` otherwise (see ``_smdebug_lite_alias``). Nothing in smdebug_lite imports
this package: it sits on top, so the core keeps its own layout.
"""
