"""smdebug's on-disk format: TFRecord framing, event protos, index and collections files, and
what the writer and the reader both need of them (index entries and their records parsed, the
compacted index's document)."""
