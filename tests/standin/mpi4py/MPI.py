"""A single-process MPI world: what HugeCTR scripts touch (COMM_WORLD rank and size)."""


class _Comm:
    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return 1

    def Barrier(self) -> None:
        return None

    def bcast(self, obj, root: int = 0):
        return obj


COMM_WORLD = _Comm()
