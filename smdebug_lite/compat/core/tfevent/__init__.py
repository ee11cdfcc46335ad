"""``smdebug.core.tfevent``: event files of tensor summaries and their index files."""
