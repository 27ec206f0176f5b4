"""Table 2 (§3.3): arjovsky vs lie_restricted vs lie_algebra at n ∈ {8, 14, 20}, SGD.

Run it into table1's workdir with the same replicates: arjovsky, lie_algebra and the
baselines are then table1's own units and are reused; only lie_restricted trains.
"""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "table1")
  c.variant = "table2"
  c.n_values = (8, 14, 20)
  c.approaches = ("true", "rand", "lstsq", "procrustes", "arjovsky", "lie_restricted",
                  "lie_algebra")
  return c
