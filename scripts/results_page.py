r"""Writes docs/results.md: the accuracy tables of every experiment kept in results/, made
from their records by the same code as their reports (tests/results_page_test.py checks
that the page and every report.md are what the records give).

  python scripts/results_page.py            # writes docs/results.md
  python scripts/results_page.py --check    # exit 1 when docs/results.md is stale
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "results.md")
# The experiments of results/, in the page's order: (folder, heading).
SECTIONS = (
    ("psmnist_16k_70ep", "Permuted MNIST (psMNIST), the protocol's 70 epochs"),
    ("smnist_16k_70ep", "Pixel-by-pixel MNIST (sMNIST), the protocol's 70 epochs"),
    ("psmnist_16k", "Permuted MNIST (psMNIST), 10 epochs"),
    ("smnist_16k", "Pixel-by-pixel MNIST (sMNIST), 10 epochs"),
    ("sfashion_16k", "Pixel-by-pixel Fashion-MNIST, 10 epochs"),
    ("psfashion_16k", "Permuted Fashion-MNIST, the image configs of 2026-11-27"),
    ("ablations/phases", "Ablation: the guRNN's initial phases"),
    ("ablations/lstm", "Ablation: the image LSTM's settings"),
    ("ablations/torch_optimizer", "Ablation: PyTorch's RMSProp and readout"),
    ("ablations/expm", "Ablation: the orthogonal RNN's exponential, eigh or Padé"),
    ("ablations/rates", "Ablation: the orthogonal RNN's learning rate"),
    ("ablations/device_layout", "Ablation: one device or two per replicate"),
    ("ablations/first_300_updates", "Ablation: the first 300 updates"),
)
_INTRO = """# Results

Made by `python scripts/results_page.py` from the records in [results/](../results/README.md),
by the code that writes each folder's `report.md` (where the per-epoch tables and figures
are); edit neither by hand. Every "±" is the standard error of the mean over the n runs
of a row (a run: one seed's replicate; the seeds are listed). All runs: 16K parameters,
batches of 128. The two "70 epochs" sections run the field's whole
protocol on a 2-core Intel Xeon CPU, each unit's batch split over both cores (an
"(unfinished)" row shows its epochs so far); every
other section, 10 of its 70 epochs on a 2-core AMD EPYC CPU. A row's setting names the
fields that tell it from the same model's other rows in its table. What was tried and
why: [results_log.md](results_log.md).

The paper's own experiments (§3 Tables 1-2, §4 Figure 3) are measured in
[reproduction.md](reproduction.md) and [rnn.md](rnn.md).
"""


def section(folder: str) -> str:
  """One experiment's tables (no per-epoch table, no published table), headings one level
  down, from its records."""
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import report
  path = os.path.join(ROOT, "results", folder)
  text = report.markdown(workdir.load_results(path, as_frame=False), per_epoch=False,
                         anchors=False, reference=workdir.read(path, report.REFERENCE))
  body = text.split("\n", 2)[2]  # after "# RNN results"
  return body.replace("\n### ", "\n#### ").replace("### ", "#### ", 1)


def page() -> str:
  from lie_unitary.experiments.rnn import report
  parts = [_INTRO]
  for folder, heading in SECTIONS:
    parts.append(f"## {heading}\n\n[results/{folder}/report.md](../results/{folder}/"
                 f"report.md)\n\n{section(folder).strip()}\n")
  parts.append("## Published\n\n" + "\n".join(report.published_table()).strip() + "\n")
  return "\n".join(parts)


def main(argv) -> int:
  text = page()
  if "--check" in argv:
    with open(PAGE, encoding="utf-8") as f:
      stale = f.read() != text
    print(f"{PAGE}: {'stale: run python scripts/results_page.py' if stale else 'current'}")
    return int(stale)
  with open(PAGE, "w", encoding="utf-8") as f:
    f.write(text)
  print(f"wrote {PAGE}")
  return 0


if __name__ == "__main__":
  sys.path.insert(0, ROOT)
  sys.exit(main(sys.argv[1:]))
