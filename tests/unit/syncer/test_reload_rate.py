"""--sync-rate-limit's token bucket, on a clock the test moves by hand."""
import pytest

from services.syncer.nginx_apply.reload_rate import ReloadRateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_first_reload_never_waits_and_the_next_waits_one_interval():
    clock = Clock()
    limiter = ReloadRateLimiter(0.3, clock=clock)
    assert limiter.ready() and limiter.ready_at() <= clock.now
    limiter.take()
    assert not limiter.ready()
    assert limiter.ready_at() == pytest.approx(clock.now + 1 / 0.3)
    clock.now += 1.0
    assert not limiter.ready()
    assert limiter.ready_at() == pytest.approx(clock.now - 1.0 + 1 / 0.3)  # asking again does not push it away
    clock.now = limiter.ready_at()
    assert limiter.ready()


def test_a_long_quiet_time_saves_no_more_than_the_burst():
    clock = Clock()
    limiter = ReloadRateLimiter(0.3, clock=clock)
    limiter.take()
    clock.now += 3600
    limiter.take()
    assert not limiter.ready()  # burst 1: one reload at once after an hour, not a thousand
    limiter = ReloadRateLimiter(2.0, burst=3, clock=clock)
    for _ in range(3):
        assert limiter.ready()
        limiter.take()
    assert not limiter.ready()
    clock.now += 0.5
    assert limiter.ready()


def test_thirty_changes_in_fifteen_seconds_make_six_reloads_the_last_one_after_the_last_change():
    """One change every 0.5 s, each needing a reload: what the sync loop does, minus nginx."""
    clock = Clock()
    limiter = ReloadRateLimiter(0.3, clock=clock)
    reloads: list[int] = []  # the number of changes each reload applied, all of them since the first
    changes, applied, step = 0, 0, 0
    while changes < 30 or applied < changes:
        if step % 5 == 0 and changes < 30:
            changes += 1  # a change that needs a reload
        if applied < changes and limiter.ready():
            limiter.take()
            applied = changes
            reloads.append(applied)
        clock.now += 0.1
        step += 1
    assert reloads == [1, 7, 14, 21, 28, 30]  # one every 3.4 s (a tenth of a second at a time), the last one last


@pytest.mark.parametrize("rate,burst", [(0.0, 1), (-1.0, 1), (0.3, 0)])
def test_a_rate_that_would_never_reload_again_is_refused(rate, burst):
    with pytest.raises(ValueError, match="above 0"):
        ReloadRateLimiter(rate, burst=burst)
