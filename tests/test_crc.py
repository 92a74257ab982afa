"""unitree_hg CRC: known answers from Unitree's own SDK (unitree_sdk2py), and sensitivity to any field."""

import numpy as np
import pytest

unitree_hg = pytest.importorskip("unitree_hg.msg")
from bcg_policy_node.crc import LOWCMD_SIZE, LOWSTATE_SIZE, lowcmd_crc, lowstate_crc, pack_lowcmd  # noqa: E402


def _sdk_example_cmd():
    c = unitree_hg.LowCmd()
    c.mode_machine = 5
    for i, m in enumerate(c.motor_cmd):
        m.mode = 1
        m.q = float(np.float32(0.1 * i))
        m.kp = 100.0 if i < 12 else 40.0
        m.kd = 2.0
    return c


def test_lowcmd_known_answers():
    assert lowcmd_crc(unitree_hg.LowCmd()) == 0xFE172F9F
    assert lowcmd_crc(_sdk_example_cmd()) == 0x803DCEA6


def test_struct_sizes_match_unitree_c_structs():
    assert (LOWCMD_SIZE, LOWSTATE_SIZE) == (1004, 2092)
    assert len(pack_lowcmd(unitree_hg.LowCmd())) == 1004


def test_crc_ignores_crc_field_and_sees_every_other_field():
    c = _sdk_example_cmd()
    ref = lowcmd_crc(c)
    c.crc = 1234
    assert lowcmd_crc(c) == ref
    c.motor_cmd[34].kd = 2.5
    assert lowcmd_crc(c) != ref
    s = unitree_hg.LowState()
    ref_s = lowstate_crc(s)
    s.wireless_remote[39] = 1
    assert lowstate_crc(s) != ref_s
