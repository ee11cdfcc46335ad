"""``python -m smdebug_lite.cli``."""

from smdebug_lite.cli import main

if __name__ == "__main__":
    main()
