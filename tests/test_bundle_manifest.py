"""The bundle format check: which side to rebuild when the versions differ."""

from __future__ import annotations

import pytest

from ragspine_lite.bundle.manifest import (
    BUNDLE_FORMAT_VERSION,
    BundleFormatError,
    check_format_version,
    check_manifest,
)
from ragspine_lite.common.errors import RagspineError


def test_the_current_version_is_accepted_as_int_or_digits():
    assert check_format_version(BUNDLE_FORMAT_VERSION) == BUNDLE_FORMAT_VERSION
    assert check_format_version(str(BUNDLE_FORMAT_VERSION)) == BUNDLE_FORMAT_VERSION


def test_an_older_bundle_says_rebuild_the_bundle():
    with pytest.raises(BundleFormatError) as info:
        check_format_version(BUNDLE_FORMAT_VERSION - 1)
    message = str(info.value)
    assert "older" in message
    assert "rebuild the bundle" in message
    assert "ragspine-lite build-site" in message


def test_a_newer_bundle_says_update_the_runtime():
    with pytest.raises(BundleFormatError) as info:
        check_format_version(BUNDLE_FORMAT_VERSION + 1)
    message = str(info.value)
    assert "newer" in message
    assert "update the runtime" in message
    assert str(BUNDLE_FORMAT_VERSION + 1) in message


@pytest.mark.parametrize("bad", [None, "one", 1.5, True, [1]])
def test_a_non_numeric_version_is_a_damaged_bundle(bad):
    with pytest.raises(BundleFormatError, match="not a number"):
        check_format_version(bad)


def test_format_errors_are_ragspine_errors():
    assert issubclass(BundleFormatError, RagspineError)


def test_check_manifest_needs_version_and_the_index_header():
    header = "data/header-0123456789abcdef.bin"
    good = {"format_version": BUNDLE_FORMAT_VERSION, "entry": {"index": header},
            "files": {header: {"sha256": "x"}}}
    assert check_manifest(good) == BUNDLE_FORMAT_VERSION
    with pytest.raises(BundleFormatError, match="format_version"):
        check_manifest({"files": good["files"]})
    with pytest.raises(BundleFormatError, match=r"index header .*rebuild"):
        check_manifest({**good, "files": {}})
    with pytest.raises(BundleFormatError, match=r"entry\.index, got None"):
        check_manifest({**good, "entry": {"store": "data/chunks.db"}})
    # A format-1 site (the whole chunk store in one file) is refused: rebuild it.
    old = {"format_version": 1, "entry": {"store": "data/chunks.db"},
           "files": {"data/chunks.db": {"sha256": "x"}}}
    with pytest.raises(BundleFormatError, match=r"older than this runtime reads .*rebuild"):
        check_manifest(old)
    with pytest.raises(BundleFormatError, match="JSON object"):
        check_manifest([])  # type: ignore[arg-type]
    with pytest.raises(BundleFormatError, match="newer"):
        check_manifest({**good, "format_version": BUNDLE_FORMAT_VERSION + 1})
