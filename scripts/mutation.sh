#!/usr/bin/env bash
# Mutation testing: mutmut makes small deliberate bugs (mutants) in the modules listed under [tool.mutmut]
# in pyproject.toml, runs the fast test subset named there against each, and this script prints the score:
# the share of mutants that some test caught. Slow (minutes to hours), so not part of .ci/run.
#   scripts/mutation.sh                                  every mutant of every listed module
#   scripts/mutation.sh 'bot.core.retry.*' 'bot.core.lifecycle.*'  only the mutants whose names match (fnmatch)
# Needs the dev install (mutmut comes with it). MUTATION_JOBS sets the parallel test runs (default 2).
# Work files go to mutants/ (git-ignored); results are kept there between runs, so a second run only
# tests what changed. `.venv/bin/mutmut show NAME` prints one mutant's diff, `.venv/bin/mutmut browse`
# walks them all.
set -euo pipefail
cd "$(dirname "$0")/.."

.venv/bin/mutmut run --max-children "${MUTATION_JOBS:-2}" "$@"

# mutmut lists every mutant it knows with its status; count those this run was asked about.
.venv/bin/mutmut results --all true | .venv/bin/python -c '
import collections, fnmatch, sys

patterns = sys.argv[1:] or ["*"]
counts = collections.Counter()
survivors = []
for line in sys.stdin:
    name, sep, status = line.strip().rpartition(": ")
    if not sep or not any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
        continue
    counts[status] += 1
    if status in ("survived", "no tests", "suspicious"):
        survivors.append(f"  {status:<10} {name}")
# Caught: a test failed, timed out (the mutant looped) or crashed. Not counted: not run, skipped.
caught = counts["killed"] + counts["timeout"] + counts["segfault"] + counts["caught by type check"]
tested = sum(n for status, n in counts.items() if status not in ("not checked", "skipped"))
print("mutants:", ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none")
for survivor in survivors:
    print(survivor)
if tested:
    print(f"mutation score: {caught}/{tested} = {100 * caught / tested:.1f} %")
else:
    print("mutation score: no mutant was tested")
' "$@"
