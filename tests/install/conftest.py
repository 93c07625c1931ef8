from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.install.test_own_project import fresh_install


@pytest.fixture(scope="module")
def installed_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One fresh venv with a non-editable install, shared by this module's tests."""
    yield fresh_install(tmp_path_factory.mktemp("install"))
