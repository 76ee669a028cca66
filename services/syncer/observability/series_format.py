"""One series' lines of one metric family (a counter's line; a histogram's buckets, `_sum` and `_count`; a
summary's quantiles, `_sum` and `_count`) written by one bytes `%` call.

At 10,000 Ingresses with traffic /metrics is about 320 MB, 96% of it bucket lines: written line by line (a text per
number, an f-string per line, a join, an encode) that was most of a scrape's CPU. Here each family has one format
holding all the lines of a series: the series' labels are put in with one `replace`, the numbers with one `%`.

The numbers are written exactly as `exposition.count` and `exposition.number` write them: whole counts under a
million kept as Python ints (as nginx's JSON gives them) with `%d`, a sum under a million with `%a` (a float's
repr); any other series (counts of a million and more, fractions, NaN) takes those functions' texts.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from . import exposition

_LIMIT = 1_000_000  # from here exposition writes Go's exponent form
_LABELS = b"\0"  # where a series' labels go: replaced in the format before `%`, so a label's own NUL stays as it is


def labels_bytes(text: str) -> bytes:
    """A series' labels text (without braces) as `SeriesFormat` takes it: a `%` in a label value doubled."""
    return text.replace("%", "%%").encode()


@dataclass(frozen=True)
class SeriesFormat:
    """The lines of one series: `usual` takes the numbers themselves, `general` their texts."""
    usual: bytes
    general: bytes

    @classmethod
    def histogram(cls, name: str, bounds: tuple[float, ...]) -> SeriesFormat:
        les = [exposition.number(bound) for bound in (*bounds, float("inf"))]
        lines = [*(f'{name}_bucket{{\0,le="{le}"}} %d\n' for le in les), f"{name}_sum{{\0}} %a\n",
                 f"{name}_count{{\0}} %d\n"]
        return cls._of("".join(lines))

    @classmethod
    def counter(cls, name: str) -> SeriesFormat:
        return cls._of(f"{name}{{\0}} %d\n")

    @classmethod
    def summary(cls, name: str, quantiles: tuple[float, ...]) -> SeriesFormat:
        lines = [*(f'{name}{{\0,quantile="{quantile}"}} %a\n' for quantile in quantiles), f"{name}_sum{{\0}} %a\n",
                 f"{name}_count{{\0}} %d\n"]
        return cls._of("".join(lines))

    @classmethod
    def _of(cls, usual: str) -> SeriesFormat:
        return cls(usual.encode(), usual.replace("%d", "%s").replace("%a", "%s").encode())

    def counter_line(self, labels: bytes, value: float) -> bytes:
        """A counter's line (a format made by `counter`); `labels` from `labels_bytes`."""
        if type(value) is int and -_LIMIT < value < _LIMIT:
            return self.usual.replace(_LABELS, labels) % value
        return self.general.replace(_LABELS, labels) % exposition.count(value).encode()

    def histogram_lines(self, labels: bytes, counts: list[float], total: float) -> bytes:
        """A histogram's lines (a format made by `histogram`) from its bucket counts (not cumulative) and the sum
        of its observations; nothing when it has none. `labels` from `labels_bytes`."""
        if not any(counts):
            return b""
        whole = sum(counts)
        # An int sum: every count is an int. Not negative: the cumulative counts are at most `whole`.
        if type(whole) is int and whole < _LIMIT and min(counts) >= 0 and -_LIMIT < total < _LIMIT:
            return self.usual.replace(_LABELS, labels) % (*accumulate(counts), float(total), whole)
        texts = [exposition.count(value).encode() for value in accumulate(counts)]
        return self.general.replace(_LABELS, labels) % (*texts, exposition.number(total).encode(), texts[-1])

    def summary_lines(self, labels: bytes, quantiles: list[float], total: float, count: float) -> bytes:
        """A summary's lines (a format made by `summary`) from its quantiles' values, sum and count."""
        if type(count) is int and 0 <= count < _LIMIT and -_LIMIT < min(quantiles) and max(quantiles) < _LIMIT \
                and -_LIMIT < total < _LIMIT:
            return self.usual.replace(_LABELS, labels) % (*map(float, quantiles), float(total), count)
        texts = [exposition.number(value).encode() for value in (*quantiles, total)]
        return self.general.replace(_LABELS, labels) % (*texts, exposition.count(count).encode())
