"""Fixtures for driving objmount's own programs from pytest."""

import pytest

from harness.omtools import OmS3


@pytest.fixture
def oms3(s3server):
    return OmS3(s3server.endpoint)
