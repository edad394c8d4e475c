"""Static bundle layout constants and the format-version check (builder and runtime share them).

A bundle is a folder: ``manifest.json`` (format version, runtime versions, sha256 of every
file, counts), the sharded index under ``data/`` (its header at the manifest's
``entry.index``; see :mod:`ragspine_lite.bundle.shards`), the wheels, the Pyodide runtime and
the web runtime. Bump :data:`BUNDLE_FORMAT_VERSION` whenever a runtime could misread an older
bundle (file layout, bundle tables, manifest keys it relies on).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragspine_lite.common.errors import RagspineError

__all__ = [
    "BUNDLE_FORMAT_VERSION",
    "BUNDLE_META_TABLE",
    "CONTENT_NAMED_DIRS",
    "FACET_FIELDS",
    "MANIFEST_NAME",
    "PAGE_TABLE",
    "SECTION_TABLE",
    "UNLISTED_DIRS",
    "BundleFormatError",
    "check_format_version",
    "check_manifest",
]

#: Version of the bundle layout; the web runtime (``ragspine-lite.mjs``) carries the same number.
BUNDLE_FORMAT_VERSION = 6
MANIFEST_NAME = "manifest.json"
#: Folders of index files that the header lists and whose names carry their sha256 (term
#: shards, text fragments, the filter file, coarse vector lists): ``manifest.json`` does not
#: list them, so it stays small however big the corpus (the web runtime has the same list).
CONTENT_NAMED_DIRS = ("data/terms/", "data/text/", "data/lists/")
#: Folders ``manifest.json`` does not list because they grow with the corpus and the runtime
#: never reads them: the index files above, and the pages rendered from Markdown/text sources
#: (``pages/``, what results link to). The manifest stays the same size for 10 or 100,000 pages.
UNLISTED_DIRS = (*CONTENT_NAMED_DIRS, "pages/")
#: Per-document heading sections (doc_id, para_start, para_end, level, heading, anchor).
SECTION_TABLE = "ragspine_bundle_section"
#: Result URL per document (doc_id, url): the page a hit links to, before its ``#anchor``.
PAGE_TABLE = "ragspine_bundle_page"
#: key/value facts about the export (format version, counts, facets), in the chunk store file.
BUNDLE_META_TABLE = "ragspine_bundle_meta"
#: Metadata fields whose distinct values a bundle lists (for filter controls).
FACET_FIELDS: tuple[str, ...] = ("topic", "entity", "geography", "period", "language")

_REBUILD_HINT = "rebuild the bundle with 'ragspine-lite build-site DOCS_DIR --out DIR'"
_UPDATE_HINT = (
    "update the runtime: rebuild the site with the ragspine_lite that made the bundle, "
    "or upgrade ragspine_lite"
)


class BundleFormatError(RagspineError):
    """A bundle cannot be read by this runtime; the message says which side to rebuild."""


def check_format_version(found: object, *, supported: int = BUNDLE_FORMAT_VERSION) -> int:
    """Return ``found`` as an int if it equals ``supported``; else raise :class:`BundleFormatError`.

    An older bundle → rebuild the bundle; a newer one → update the runtime.

    >>> check_format_version(5)
    5
    """
    if isinstance(found, bool) or not isinstance(found, (int, str)):
        raise BundleFormatError(
            f"bundle format version {found!r} is not a number; the bundle is damaged: "
            f"{_REBUILD_HINT}"
        )
    try:
        version = int(found)
    except ValueError:
        raise BundleFormatError(
            f"bundle format version {found!r} is not a number; the bundle is damaged: "
            f"{_REBUILD_HINT}"
        ) from None
    if version < supported:
        raise BundleFormatError(
            f"bundle format version {version} is older than this runtime reads ({supported}): "
            f"{_REBUILD_HINT}"
        )
    if version > supported:
        raise BundleFormatError(
            f"bundle format version {version} is newer than this runtime reads ({supported}): "
            f"{_UPDATE_HINT}"
        )
    return version


def check_manifest(manifest: Mapping[str, Any]) -> int:
    """Validate the keys a runtime relies on; return the format version.

    Raises :class:`BundleFormatError` for a missing/mismatched ``format_version`` or a
    manifest whose ``files`` table does not list the index header ``entry.index``.
    """
    if not isinstance(manifest, Mapping):
        raise BundleFormatError(
            f"{MANIFEST_NAME} must be a JSON object, got {type(manifest).__name__}: "
            f"{_REBUILD_HINT}"
        )
    if "format_version" not in manifest:
        raise BundleFormatError(f"{MANIFEST_NAME} has no 'format_version': {_REBUILD_HINT}")
    version = check_format_version(manifest["format_version"])
    entry = manifest.get("entry")
    header = entry.get("index") if isinstance(entry, Mapping) else None
    files = manifest.get("files")
    if not isinstance(header, str) or not isinstance(files, Mapping) or header not in files:
        raise BundleFormatError(
            f"{MANIFEST_NAME} does not list the index header (entry.index, got {header!r}): "
            f"{_REBUILD_HINT}"
        )
    return version
