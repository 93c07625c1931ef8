from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.install.test_own_project import fresh_install


@pytest.fixture(scope="module", params=["lowest", "newest"])
def installed_venv(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, list[str]]]:
    """A team's venv pinning our core dependencies at our lowest bounds, or at the newest
    releases, with a non-editable install of ours: shared by this module's tests."""
    yield fresh_install(tmp_path_factory.mktemp(f"install-{request.param}"), request.param)
