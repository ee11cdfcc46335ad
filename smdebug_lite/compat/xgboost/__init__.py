"""``smdebug.xgboost.*`` modules that smdebug_lite.xgboost does not have under smdebug's names."""
