"""``smdebug.profiler``: profiling is not part of smdebug-lite (``docs/compatibility.md``).

Only the constants module is served, so code that imports a file-name constant from it (tests,
distributed launch helpers) still loads; every other profiler module is absent.
"""
