"""What every family's report is made of: Markdown tables, mean ± standard error (one `SE`)
and its bands, figures (no pyplot), the published rows (published.json), the machines note."""

import importlib.resources
import json
import os
from typing import Any
from typing import Callable
from typing import Iterable
from typing import Sequence

import numpy as np

from lie_unitary.experiments import workdir as workdir_lib

# Every report's one definition of "±", said in the headers that use it.
SE = "mean ± standard error over the n runs (ddof = 1; a run: one seed's replicate)"


def mean_se(values: Iterable[Any]) -> tuple[float, float, int]:
  """(mean, std(ddof=1) / √n, n) of `values`, None skipped, as floats; nan where too few."""
  v = np.asarray([float(x) for x in values if x is not None], np.float64)
  se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.nan
  return (float(v.mean()) if len(v) else np.nan), float(se), len(v)


def pm(values: Iterable[Any], fmt: Callable[[float], str] = "{:.3g}".format) -> str:
  """"m ± s" (`mean_se`) formatted by `fmt`; the value alone for one, "—" for none."""
  mean, se, n = mean_se(values)
  return "—" if not n else fmt(mean) if n == 1 else f"{fmt(mean)} ± {fmt(se)}"


def table(header: Sequence[Any], rows: Iterable[Sequence[Any]]) -> list[str]:
  """A Markdown table's lines (cells by `str`), then an empty line."""
  line = lambda cells: "| " + " | ".join(map(str, cells)) + " |"
  return [line(header), "|" + "---|" * len(header)] + [line(r) for r in rows] + [""]


def figure(figsize: tuple[float, float], *grid: int, **subplots_kw):
  """A `Figure` of `figsize` inches and its ``Figure.subplots(*grid, **subplots_kw)``."""
  from matplotlib.figure import Figure
  fig = Figure(figsize=figsize)
  return fig, fig.subplots(*grid, **subplots_kw)


def se_band(ax, x, values, color, **plot_kw):
  """Plots on `ax` the means of `values` (p, runs) against `x` (p,), ± 1 s.e.; the means.
  One point (p = 1) is a marker with an error bar, which a line could not show."""
  values = np.asarray(values, np.float64)
  mean, runs = values.mean(axis=1), values.shape[1]
  se = values.std(axis=1, ddof=1) / np.sqrt(runs) if runs > 1 else np.zeros_like(mean)
  if len(mean) == 1:
    ax.errorbar(x, mean, yerr=se, fmt="o", color=color, capsize=3, **plot_kw)
    return mean
  ax.plot(x, mean, color=color, **plot_kw)
  ax.fill_between(x, mean - se, mean + se, color=color, alpha=0.2, lw=0)
  return mean


def published(name: str) -> tuple[dict, list[dict]]:
  """(description, rows) of the table `name` of published.json, each row with its
  "protocol" and "source" (the table's unless its own); KeyError: no such table."""
  data = json.loads(importlib.resources.files(__package__).joinpath(
      "published.json").read_text("utf-8"))
  if name not in data["tables"]:
    raise KeyError(f"no published table {name!r}; there are {sorted(data['tables'])}")
  with_source = lambda r: {**r, "source": dict(data["sources"][r["source"]])}
  info = {k: v for k, v in data["tables"][name].items() if k != "rows"}
  return with_source(info), [with_source({"protocol": info["protocol"], "source": info["source"],
                                          **r}) for r in data["tables"][name]["rows"]]


def published_table(name: str) -> list[str]:
  """The table `name` of published.json in Markdown: what it gives, its protocol, its rows
  and their sources, with numbered notes saying where a row was read and its other protocol."""
  info, rows = published(name)
  columns = [k for k in rows[0] if k not in ("protocol", "source")]
  note = lambda r: " ".join(
      [f"Read from {r['source']['where']}."] * r["source"]["read_from_a_copy"]
      + [f"Protocol: {r['protocol']}."] * (r["protocol"] != info["protocol"]))
  notes = [n for n in dict.fromkeys(map(note, rows)) if n]
  cite = lambda r: r["source"]["cite"] + (f" [{notes.index(note(r)) + 1}]" if note(r) else "")
  return ([f"Published, {info['what']}: {info['protocol']}:", ""]
          + table([*columns, "source"], [[r[k] for k in columns] + [cite(r)] for r in rows])
          + [x for k, n in enumerate(notes) for x in (f"[{k + 1}] {n}", "")])


_HOST = ("host", "platform")  # machines told apart by these only where no cpu_model is named
_MACHINE = ("cpu_model", "cpu", "device_kind", *_HOST, "backend", "devices", "process_count")


def machines_note(launches: Sequence[dict], units: Iterable[str]) -> list[str]:
  """A warning line and an empty one when the launches naming `units` (a table's ids)
  differ in machine or device layout, saying what differs for which units; else []."""
  units, by = set(units), {}
  for launch in launches:
    p, mine = launch.get("provenance", {}), {u["id"] for u in launch.get("units", ())} & units
    if mine:
      by.setdefault(tuple((k, len(p[k]) if k == "devices" else p[k]) for k in _MACHINE if k in p
                          and not (p.get("cpu_model") and k in _HOST)), set()).update(mine)
  if len(by) < 2:
    return []
  differ = [k for k in _MACHINE if len({dict(m).get(k) for m in by}) > 1]
  groups = "; ".join(", ".join(f"{k} {dict(m).get(k, '?')}" for k in differ
                               if k in dict(m) or k not in _HOST)
                     + ": " + ", ".join(sorted(u)) for m, u in by.items())
  return [f"**Launched on {len(by)} machines or device layouts** (wall times may not compare; "
          "told apart by the launches' provenance"
          + ("" if any(k in differ for k in _MACHINE[:3]) else ", which names no CPU model")
          + f"): {groups}.", ""]


def latest(records: Any, kind: str, keys: Sequence[str] = ("replicate",)) -> list[dict]:
  """The last record of `kind` (or none) per unit and `keys` of `records` (or a DataFrame)."""
  return list({(r.get("unit"),) + tuple(r.get(k) for k in keys): r
               for r in workdir_lib.as_records(records) if r.get("kind", kind) == kind}.values())


def write_report(workdir: str, results: Any, figures: Callable[[list], dict],
                 markdown: Callable[..., str], dpi: int = 120, **markdown_kw) -> list[str]:
  """Saves name.png per `figures(records)` {name: Figure} at `dpi` and
  report.md, `markdown(records, figure_files=, launches=, **markdown_kw)`, in `workdir`, of
  `results` (None: the workdir's; FileNotFoundError, ValueError: none); returns their paths."""
  results = workdir_lib.as_records(
      workdir_lib.load_results(workdir, as_frame=False) if results is None else results)
  files = {}
  for name, fig in figures(results).items():
    files[name] = f"{name}.png"
    fig.savefig(os.path.join(workdir, files[name]), dpi=dpi)
  with open(os.path.join(workdir, "report.md"), "w", encoding="utf-8") as f:
    f.write(markdown(results, figure_files=files, launches=workdir_lib.read_launches(workdir),
                     **markdown_kw))
  return [os.path.join(workdir, name) for name in ("report.md", *files.values())]
