"""Stand-in for mpi4py (HugeCTR scripts import ``from mpi4py import MPI`` to initialise MPI): one process, rank 0."""
