"""The kube testenv's CA serial: openssl refuses a serial file with an odd count of digits."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from testenv_lib.kube import first_serial


def test_every_first_serial_is_sixteen_hex_digits_of_a_positive_number() -> None:
    for _ in range(2000):  # a plain :X was odd one start in sixteen
        serial = first_serial()
        assert len(serial) == 16, serial
        assert 0 < int(serial, 16) < 2**63, serial
