"""java.util.Random (a 48-bit linear congruential generator), to draw what ARX's tests draw:
EDDifferentialPrivacy's deterministic sample and TestAnonymizationSubset's research subsets, both
from `new Random(0xDEADBEEF)`."""

from __future__ import annotations

ARX_SEED = 0xDEADBEEF - (1 << 32)  # Java's int literal 0xDEADBEEF is negative, widened to long


class JavaRandom:
    MASK = (1 << 48) - 1

    def __init__(self, seed: int):
        self.seed = (seed ^ 0x5DEECE66D) & self.MASK

    def _next(self, bits: int) -> int:
        self.seed = (self.seed * 0x5DEECE66D + 0xB) & self.MASK
        return self.seed >> (48 - bits)

    def next_double(self) -> float:
        return ((self._next(26) << 27) + self._next(27)) * (1.0 / (1 << 53))

    def next_int(self, bound: int) -> int:
        """Random.nextInt(bound): a power of two by the high bits, else by rejection of the draws
        whose int arithmetic would overflow (u - r + (bound - 1) < 0 in Java)."""
        r, m = self._next(31), bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if u - r + m < (1 << 31):
                return r
            u = self._next(31)
