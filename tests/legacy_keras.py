"""Running a script as an unchanged TF 2.x user script runs today: ``TF_USE_LEGACY_KERAS=1``
(``tf.keras`` is ``tf_keras``, Keras 2), with the ``smdebug`` alias installed, in a process of
its own; optionally under a MirroredStrategy over two logical CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MIRRORED_SETUP = (
    'cpu = tf.config.list_physical_devices("CPU")[0]\n'
    "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)"
)


def run_legacy_script(template: str, out: str, mirrored: bool) -> str:
    """Run `template` (with ``{setup}`` and ``{strategy}`` fields; ``sys.argv[1]`` is `out`)
    and return `out`; fails the test with the script's stderr if it fails."""
    script = template.format(
        setup=MIRRORED_SETUP if mirrored else "",
        strategy='tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])' if mirrored
        else "tf.distribute.get_strategy()")
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
           "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", "import _smdebug_lite_alias as a; a.install()\n"
                           + script, out], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out
