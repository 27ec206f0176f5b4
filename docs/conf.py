"""Sphinx configuration of the documentation site.

Build (what CI runs; warnings are errors, so a broken link or cross-reference fails it):

    pip install -e '.[docs]'
    sphinx-build -W --keep-going -c docs -b html . docs/_build/html

The source folder is the repository's root (`-c docs`: this file's folder holds the
configuration), so that the guides' links to the records and reports of results/ and to
the notebooks of notebooks/ are the same relative links on the site as in the
repository; `include_patterns` picks the pages. The pages are MyST Markdown; the
notebooks are rendered from their saved outputs (never executed here); the API reference
is generated from the docstrings.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's package, also without an install

from lie_unitary import _version  # noqa: E402

project = "lie_unitary"
author = "the lie_unitary authors"
copyright = "the lie_unitary authors"  # noqa: A001
release = _version.__version__
version = release

extensions = [
    "myst_nb",  # MyST Markdown pages and rendered notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",  # Google-style docstrings
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

root_doc = "docs/index"
include_patterns = ["docs/**", "notebooks/*.ipynb", "results/README.md", "results/**/report.md"]
exclude_patterns = ["docs/_build", "docs/_templates", "**/.ipynb_checkpoints", ".venv", ".git",
                    "build", "runs"]
# The root of the built site sends the browser on to docs/index.html.
html_extra_path = ["_root"]  # relative to this folder
# .rst first: autosummary writes its generated pages (reStructuredText) with the first suffix.
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

# Notebooks: their saved outputs, as committed (they take minutes of training each).
nb_execution_mode = "off"
nb_merge_streams = True

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 4
# The generated tables (results.md, the reports of results/) go from a section's heading to
# a table's at level 4.
suppress_warnings = ["myst.header"]  # [text](page.md#a-heading) links resolve, as on GitHub

# API reference: one page per name, generated at build time from the docstrings.
autosummary_generate = True
autosummary_imported_members = True
# A class's page: its own documented methods, no tables of every inherited one. (Relative
# to the source folder, where autosummary looks.)
templates_path = ["docs/_templates"]
autodoc_default_options = {"members": False}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"  # no type-only entries for undocumented fields
autodoc_member_order = "bysource"
add_module_names = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# The site's links go to the repository's files where a page links outside docs/.
html_theme = "sphinx_book_theme"
html_title = f"lie_unitary {release}"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": False,
}
html_static_path = []

# Every cross-reference to this package must resolve; those to other libraries (jax,
# flax, numpy: no intersphinx inventories offline) are left as plain text.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(?!lie_unitary\.).*"),
    # The runner's signatures name the experiment layer's internal types.
    (r"py:class", r"lie_unitary\.experiments\.(fields|loop)\..*"),
]

# No internet where CI builds: links out of the site are not checked (linkcheck_ignore),
# the internal ones and every cross-reference are (warnings are errors).
linkcheck_ignore = [r"https?://.*"]

# The docstrings write maths inline in plain text: |z| is an absolute value, not an rST
# substitution, outside ``code`` and off table lines.
_ABS = re.compile(r"(?<![\\|])\|(?=\S)([^|`]*?\S)\|(?![|_])")
_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?=[\s),.;:]|$)")  # expRNN's kaiming_normal_
_BUILTIN_DOCS = {t.__doc__ for t in (dict, tuple, list, str, int, float, frozenset, set)}


def _plain_text_docstring(app, what, name, obj, options, lines):
  del app, name, options
  if what in ("data", "attribute") and getattr(obj, "__doc__", None) in _BUILTIN_DOCS:
    text = "\n".join(lines)
    if text.strip() and text.strip() in {d.strip() for d in _BUILTIN_DOCS}:
      lines.clear()  # a constant's type's docstring (dict's, tuple's) says nothing of it
      return
  for i, line in enumerate(lines):
    stripped = line.strip()
    if stripped.startswith("+-") or (stripped.startswith("|") and stripped.endswith("|")):
      continue  # a table's row
    parts = line.split("`")
    parts[::2] = [_TRAILING_UNDERSCORE.sub(r"\\_", _ABS.sub(r"\\|\1\\|", p))
                  for p in parts[::2]]
    lines[i] = "`".join(parts)


def _skip_namedtuple_fields(app, what, name, obj, skip, options):
  """A NamedTuple's fields are described by its docstring's Attributes section."""
  del app, what, name, options
  if (getattr(obj, "__doc__", None) or "").startswith("Alias for field number"):
    return True
  return skip


def setup(app):
  app.connect("autodoc-process-docstring", _plain_text_docstring)
  app.connect("autodoc-skip-member", _skip_namedtuple_fields)
