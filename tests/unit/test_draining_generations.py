"""The bound on old nginx workers still draining: which ones a reload stops (pids only, no processes)."""
import pytest

from services.nginxconf.draining import DrainingGenerations

MASTER = 100


def test_within_the_limit_nothing_is_stopped():
    generations = DrainingGenerations(limit=2)
    assert generations.after_reload(MASTER, retired={1, 2}, draining={1, 2}) == set()
    assert generations.after_reload(MASTER, retired={3, 4}, draining={1, 2, 3, 4}) == set()


def test_past_the_limit_the_oldest_generation_is_stopped_whole():
    generations = DrainingGenerations(limit=2)
    generations.after_reload(MASTER, retired={1, 2}, draining={1, 2})
    generations.after_reload(MASTER, retired={3, 4}, draining={1, 2, 3, 4})
    assert generations.after_reload(MASTER, retired={5, 6}, draining={1, 2, 3, 4, 5, 6}) == {1, 2}
    # Stopped, they are gone from the count: the next reload stops the next oldest.
    assert generations.after_reload(MASTER, retired={7}, draining={3, 4, 5, 6, 7}) == {3, 4}


def test_a_generation_whose_workers_finished_no_longer_counts():
    generations = DrainingGenerations(limit=2)
    generations.after_reload(MASTER, retired={1, 2}, draining={1, 2})
    generations.after_reload(MASTER, retired={3, 4}, draining={2, 3, 4})
    # 1 and 2 finished their requests; 3 did too: two generations left, {4} and {5}.
    assert generations.after_reload(MASTER, retired={5}, draining={4, 5}) == set()
    assert generations.after_reload(MASTER, retired={6}, draining={4, 5, 6}) == {4}


def test_workers_of_no_known_reload_count_as_the_oldest_generation():
    """Draining before this syncer started (it was restarted during a storm): stopped first."""
    generations = DrainingGenerations(limit=1)
    assert generations.after_reload(MASTER, retired={5}, draining={1, 2, 5}) == {1, 2}
    assert generations.after_reload(MASTER, retired={6}, draining={5, 6}) == {5}


def test_a_new_master_starts_the_count_again():
    generations = DrainingGenerations(limit=1)
    generations.after_reload(MASTER, retired={1}, draining={1})
    assert generations.after_reload(MASTER + 1, retired={7}, draining={7}) == set()


def test_at_least_one_generation_drains():
    with pytest.raises(ValueError, match="at least one generation"):
        DrainingGenerations(limit=0)
