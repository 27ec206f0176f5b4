"""Prints pip constraints pinning every dependency in pyproject.toml to its floor.

Every requirement in [project] dependencies and optional-dependencies must have a
`>=` floor; each becomes `name==floor`, so the floors are written in one place
(pyproject.toml) and .ci/run's minimum-versions job installs exactly them:

  python .ci/min_constraints.py > constraints.txt
  pip install '.[test]' -c constraints.txt

Needs Python >= 3.11 (tomllib).
"""

import pathlib
import re
import sys
import tomllib

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*$")


def floors(pyproject: dict) -> list[str]:
  project = pyproject["project"]
  requirements = list(project.get("dependencies", []))
  for extra in project.get("optional-dependencies", {}).values():
    requirements += extra
  lines, seen = [], set()
  for requirement in requirements:
    if ";" in requirement:
      raise SystemExit(f"min_constraints: environment markers are not supported: {requirement!r}")
    match = _REQUIREMENT.match(requirement)
    if not match:
      raise SystemExit(f"min_constraints: cannot parse requirement {requirement!r}")
    name, _, specifiers = match.groups()
    found = [s.strip()[2:].strip() for s in specifiers.split(",") if s.strip().startswith(">=")]
    if len(found) != 1:
      raise SystemExit(f"min_constraints: {requirement!r} needs exactly one '>=' floor")
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key not in seen:
      seen.add(key)
      lines.append(f"{name}=={found[0]}")
  return lines


def main() -> None:
  path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                      pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml")
  with open(path, "rb") as f:
    print("\n".join(floors(tomllib.load(f))))


if __name__ == "__main__":
  main()
