#!/usr/bin/env bash
# Regenerate the hash-pinned lock files from pyproject.toml:
#   requirements.lock      the runtime dependencies (the Dockerfile and the README's install)
#   requirements-dev.lock  the runtime and the dev dependencies (the README's test command and .ci/run)
# Run it after the dev install (uv comes with it) whenever pyproject.toml's dependencies change.
# Pins that still satisfy pyproject.toml are kept; extra arguments go to `uv pip compile`, e.g.
#   scripts/lock.sh --upgrade                    re-resolve everything to the newest allowed releases
#   scripts/lock.sh --upgrade-package aiohttp    move only aiohttp (and what it needs)
set -euo pipefail
cd "$(dirname "$0")/.."

# --universal: one lock for every OS and every Python from requires-python up (markers say which lines apply).
# --custom-compile-command: the header of each lock names this script as the way to regenerate it.
compile=(.venv/bin/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes
         --no-strip-markers --custom-compile-command "scripts/lock.sh" --quiet "$@")
"${compile[@]}" --output-file requirements.lock
# The dev lock starts from the runtime pins, so both files agree on every package they share.
"${compile[@]}" --extra dev --constraint requirements.lock --output-file requirements-dev.lock
