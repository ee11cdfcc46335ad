"""``python -m smdebug_lite.cli``."""

from smdebug_lite.cli import main

main()
