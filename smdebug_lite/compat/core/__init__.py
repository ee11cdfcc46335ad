"""``smdebug.core``: the semi-internal modules that published code and smdebug's own tests import."""
