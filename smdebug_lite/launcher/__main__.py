"""``python -m smdebug_lite.launcher script.py args...``: same as ``smdebug-train``."""

from smdebug_lite.launcher.train import main

if __name__ == "__main__":
    raise SystemExit(main())
