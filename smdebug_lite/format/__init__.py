"""smdebug's on-disk format: TFRecord framing, event protos, index and collections files."""
