#!/bin/bash
# Runs an engine test (test/spark/spark_test.py, test/ray/ray_test.py) with the Python of the
# engines venv (scripts/venv.sh engines: pinned pyspark and ray over Debian's python3-torch).
# Exit 77 (skipped) when that venv is not there, or hora.torch was not built.
py="${ENGINES_VENV:?}/bin/python"
[ -x "$py" ] || { echo "skip: no engines venv at $ENGINES_VENV (make it with scripts/venv.sh engines)"; exit 77; }
[ -d "${PYTHONPATH%%:*}/hora/driver" ] || { echo "skip: hora.driver was not built (-Dtorch)"; exit 77; }
exec "$py" "$@"
