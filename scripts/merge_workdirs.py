r"""Gathers units of several workdirs into one experiment's workdir (records, launches, the
PyTorch reference's records; not checkpoints); then the family's launcher with
`--report_only` remakes its report.

  python scripts/merge_workdirs.py --into=results/psmnist_16k runs/seed0 runs/seed1
  python scripts/merge_workdirs.py --into=results/ablations/phases runs/a \
      --units='permuted T=784 gurnn-360f21f1ede4'
"""

import json
import os
from typing import Callable

from lie_unitary.experiments import workdir


def merge(destination, source, keep: Callable[[dict], bool] | None = None,
          reference: bool = True) -> int:
  """Adds the units of workdir `source` to workdir `destination`: their records (results,
  curves, finished), the launches that list them (each renumbered after the
  destination's, the others' units left out) and, with `reference`, the PyTorch
  reference's records (torch_*.jsonl) not already there. Checkpoints are not copied.
  How several seeds' folders become one experiment's.

  Args:
    destination, source: workdirs (`destination` is created).
    keep: which units to take, given a launch's entry of a unit ({"id", "name",
      "fields", ...}); default every unit.
    reference: whether to take the reference's records too.

  Returns:
    The number of records added.

  Raises:
    ValueError: an unreadable launch file, a source that is no workdir (no launch file)
      or holds none of the units `keep` takes, a destination that is a file.
  """
  launches = workdir.read_launches(source)
  wanted = {u["id"] for la in launches for u in la["units"] if keep is None or keep(u)}
  if not launches or not wanted or os.path.isfile(destination):
    raise ValueError(f"{source}: no workdir (no launch file)" if not launches else
                     f"{source}: none of its units is taken" if not wanted else
                     f"{destination}: a file, not a workdir")
  added = 0
  for name in (workdir.RESULTS, workdir.CURVES, workdir.FINISHED):
    have = {json.dumps(r, sort_keys=True) for r in workdir.read(destination, name)}
    new = [r for r in workdir.read(source, name) if r.get("unit") in wanted
           and json.dumps(r, sort_keys=True) not in have]
    workdir.append_records(workdir.path(destination, name), new)
    added += len(new)
  folder = workdir.path(destination, "launches")
  os.makedirs(folder, exist_ok=True)
  have = {json.dumps(la, sort_keys=True) for la in workdir.read_launches(destination)}
  for launch in launches:
    units = [u for u in launch["units"] if u["id"] in wanted]
    if units and json.dumps({**launch, "units": units}, sort_keys=True) not in have:
      number = len([f for f in os.listdir(folder) if f.endswith(".json")])
      stamp = launch.get("provenance", {}).get("time", "").replace("-", "").replace(":", "")
      with open(os.path.join(folder, f"{number:04d}-{stamp[:15]}.json"), "x",
                encoding="utf-8") as f:
        json.dump({**launch, "units": units}, f, indent=1, sort_keys=True)
  for name in sorted(os.listdir(source)) if reference else ():
    if name.startswith("torch_") and name.endswith(".jsonl"):
      have = {json.dumps(r, sort_keys=True) for r in workdir.read(destination, name)}
      workdir.append_records(workdir.path(destination, name), [r for r in workdir.read(source, name)
                                               if json.dumps(r, sort_keys=True) not in have])
  return added


def main(argv):
  from absl import app
  from absl import flags
  if len(argv) < 2:
    raise app.UsageError("name the workdirs to merge.")
  units = flags.FLAGS.units
  for source in argv[1:]:
    keep = None if units is None else (lambda u: u["id"] in units)
    try:
      print(f"{source}: {merge(flags.FLAGS.into, source, keep)} records")
    except ValueError as e:
      raise app.UsageError(str(e)) from None


if __name__ == "__main__":
  from absl import app
  from absl import flags
  flags.DEFINE_string("into", None, "The workdir to add the units to (created).", required=True)
  flags.DEFINE_list("units", None, "Unit ids to take (default: every unit).")
  app.run(main)
