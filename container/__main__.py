"""``python -m smdebug_lite.container script.py args...``: same as ``smdebug-train``."""

from smdebug_lite.container.train import main

if __name__ == "__main__":
    raise SystemExit(main())
