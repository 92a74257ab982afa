"""unitree_hg CRC: known answers from Unitree's own SDK (unitree_sdk2py), and sensitivity to any field."""

import numpy as np
import pytest

from bcg_policy_node.crc import (
    LOWCMD_SIZE,
    LOWSTATE_SIZE,
    crc32_mpeg2_words,
    lowcmd_crc,
    lowstate_crc,
    pack_lowcmd,
)
from unitree_hg.msg import LowCmd, LowState


def _crc32_core(words: np.ndarray) -> int:
    """unitree_sdk2's crc32_core, bit by bit (the slow reference)."""
    crc = 0xFFFFFFFF
    for data in words.tolist():
        xbit = 1 << 31
        for _ in range(32):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else (crc << 1)
            crc &= 0xFFFFFFFF
            if data & xbit:
                crc ^= 0x04C11DB7
            xbit >>= 1
    return crc


def _sdk_example_cmd():
    c = LowCmd()
    c.mode_machine = 5
    for i, m in enumerate(c.motor_cmd):
        m.mode = 1
        m.q = float(np.float32(0.1 * i))
        m.kp = 100.0 if i < 12 else 40.0
        m.kd = 2.0
    return c


def test_lowcmd_known_answers():
    assert lowcmd_crc(LowCmd()) == 0xFE172F9F
    assert lowcmd_crc(_sdk_example_cmd()) == 0x803DCEA6


def test_struct_sizes_match_unitree_c_structs():
    assert (LOWCMD_SIZE, LOWSTATE_SIZE) == (1004, 2092)
    assert len(pack_lowcmd(LowCmd())) == 1004


def test_crc_ignores_crc_field_and_sees_every_other_field():
    c = _sdk_example_cmd()
    ref = lowcmd_crc(c)
    c.crc = 1234
    assert lowcmd_crc(c) == ref
    c.motor_cmd[34].kd = 2.5
    assert lowcmd_crc(c) != ref
    s = LowState()
    ref_s = lowstate_crc(s)
    s.wireless_remote[39] = 1
    assert lowstate_crc(s) != ref_s


def test_fast_crc_equals_sdk_reference_on_random_words():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 250):
        words = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype("<u4")
        assert crc32_mpeg2_words(words.tobytes()) == _crc32_core(words)
    with pytest.raises(ValueError, match="whole uint32 words"):
        crc32_mpeg2_words(b"abc")
