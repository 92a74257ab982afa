"""Shared fixtures. Reference data (menagerie G1, LAFAN1-G1 clips) is read from ../shared/data next to the
checkout, or from $BCG_SHARED_DATA; tests that need it skip with a reason when it is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("BCG_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def menagerie_g1_xml() -> Path:
    p = shared_data_dir() / "g1" / "menagerie_unitree_g1" / "g1.xml"
    if not p.is_file():
        pytest.skip(f"MuJoCo Menagerie G1 not found at {p} (reference data; set BCG_SHARED_DATA)")
    return p


@pytest.fixture(scope="session")
def lafan1_dir() -> Path:
    p = shared_data_dir() / "motions" / "lafan1_g1"
    if not any(p.glob("*.csv")):
        pytest.skip(f"LAFAN1-G1 clips not found in {p} (reference data; set BCG_SHARED_DATA)")
    return p
