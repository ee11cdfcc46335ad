"""``python -m container script.py args...``: same as ``python -m container.train``."""

from container.train import main

raise SystemExit(main())
