"""ETL from the spec: the ``etl:`` section -> a validated plan -> ``etl.py`` -> NVTabular on one process or Dask."""
