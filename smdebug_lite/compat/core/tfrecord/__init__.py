"""``smdebug.core.tfrecord``: TFRecord framing of event files (``smdebug_lite.format.records``)."""
