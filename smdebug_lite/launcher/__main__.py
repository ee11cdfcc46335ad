"""``python -m smdebug_lite.launcher script.py args...``: same as ``smdebug-train``."""

from smdebug_lite.launcher.train import main

raise SystemExit(main())
