r"""Gathers units of several workdirs into one experiment's workdir (records, launches, the
PyTorch reference's records; not checkpoints), then `--report_only` remakes its report.

  python scripts/merge_workdirs.py --into=results/psmnist_16k runs/seed0 runs/seed1
  python scripts/merge_workdirs.py --into=results/ablations/phases runs/a \
      --units='permuted T=784 gurnn-360f21f1ede4'
"""

from absl import app
from absl import flags

from lie_unitary.experiments import workdir

_INTO = flags.DEFINE_string("into", None, "The workdir to add the units to (created).",
                            required=True)
_UNITS = flags.DEFINE_list("units", None, "Unit ids to take (default: every unit).")


def main(argv):
  if len(argv) < 2:
    raise app.UsageError("name the workdirs to merge.")
  for source in argv[1:]:
    keep = None if _UNITS.value is None else (lambda u: u["id"] in _UNITS.value)
    added = workdir.merge(_INTO.value, source, keep)
    print(f"{source}: {added} records")


if __name__ == "__main__":
  app.run(main)
