"""One small file per experiment: ``get_config()`` starts from its family's defaults and
sets that experiment's fields. Copy one to write your own::

    python -m lie_unitary.experiments.operators --config=configs/table1.py --workdir=runs/t1
    python -m lie_unitary.experiments.operators --config=table1 --workdir=runs/t1  # by name
"""
