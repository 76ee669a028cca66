"""IPv4 forwarding is turned on only when it is off: container runtimes mount /proc/sys read-only, and the
ADD of an ipMasq network must not fail there when forwarding is already on (a real read-only mount)."""
import subprocess

import pytest

from services.cniworker.masquerade import enable_ip_forwarding


@pytest.fixture
def read_only_switch(tmp_path):
    """A file holding "1" on a read-only tmpfs, as /proc/sys/net/ipv4/ip_forward is in a container."""
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(tmp_path)], check=True)
    try:
        (tmp_path / "ip_forward").write_text("1\n")
        subprocess.run(["mount", "-o", "remount,ro", str(tmp_path)], check=True)
        yield tmp_path / "ip_forward"
    finally:
        subprocess.run(["umount", str(tmp_path)], check=True)


def test_already_on_is_left_alone_on_a_read_only_mount(read_only_switch):
    with pytest.raises(OSError):
        open(read_only_switch, "w").close()  # the situation: no one may open it for writing
    enable_ip_forwarding(str(read_only_switch))
    assert read_only_switch.read_text() == "1\n"


def test_off_is_turned_on(tmp_path):
    switch = tmp_path / "ip_forward"
    switch.write_text("0\n")
    enable_ip_forwarding(str(switch))
    assert switch.read_text().strip() == "1"
