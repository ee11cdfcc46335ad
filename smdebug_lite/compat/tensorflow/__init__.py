"""``smdebug.tensorflow.*`` modules that smdebug_lite.tensorflow does not have under smdebug's
names."""
