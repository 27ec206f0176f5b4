"""Package discovery (the rest of the metadata is in pyproject.toml).

Every package under lie_unitary/ is found, so a new subpackage cannot be left out of the
wheel; configs/ ships as lie_unitary.configs.
"""

import setuptools

setuptools.setup(
    packages=[*setuptools.find_packages(include=["lie_unitary", "lie_unitary.*"]),
              "lie_unitary.configs"],
    package_dir={"lie_unitary.configs": "configs"},
)
