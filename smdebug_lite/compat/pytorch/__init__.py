"""``smdebug.pytorch.*`` modules that smdebug_lite.pytorch does not have under smdebug's names."""
