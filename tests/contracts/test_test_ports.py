"""The free ports the tests hand their servers (``tests.ports``): never one another test process holds."""

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.ports import _held, _range, free_port

ROOT = Path(__file__).resolve().parents[2]


def test_a_port_held_by_one_test_process_is_not_handed_to_another():
    held = free_port()
    # The other process draws the held port first (random.choice made to), then any.
    child = textwrap.dedent(f"""
        import random
        from tests import ports
        draws = iter([{held}])
        ports.random.choice = lambda seq: next(draws, None) or random.Random().choice(seq)
        print(ports.free_port())
    """)
    out = subprocess.run(
        [sys.executable, "-c", child], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    )
    assert int(out.stdout) != held and int(out.stdout) in _range()


def test_ports_come_from_below_the_kernels_ephemeral_range_and_differ():
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == 20 and all(port in _held and port in _range() for port in ports)
    assert max(_range()) < int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
