"""The names and values of smdebug's profiler constants that non-profiling code imports."""

from __future__ import annotations

# Where the profiler wrote its trace files, under a trial's out_dir.
DEFAULT_PREFIX = "framework/pevents"
DEFAULT_SYSTEM_PROFILER_PREFIX = "system"
BASE_FOLDER_DEFAULT = "/opt/ml/output/profiler"
CONFIG_PATH_DEFAULT = "/opt/ml/input/config/profilerconfig.json"
TRACE_DIRECTORY_FORMAT = "%Y%m%d%H"

# Suffixes of the timeline files.
HOROVODTIMELINE_SUFFIX = "horovod_timeline.json"
MERGEDTIMELINE_SUFFIX = "merged_timeline.json"
MODELTIMELINE_SUFFIX = "model_timeline.json"
PYTHONTIMELINE_SUFFIX = "pythontimeline.json"
SMDATAPARALLELTIMELINE_SUFFIX = "smdataparallel_timeline.json"
TENSORBOARDTIMELINE_SUFFIX = "trace.json.gz"

# Units.
CONVERT_TO_MICROSECS = 1_000_000
CONVERT_MICRO_TO_NS = 1000
