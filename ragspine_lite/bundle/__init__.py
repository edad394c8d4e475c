"""Static bundles: export a document folder RESTRICTED-free, and search it in the browser.

``export`` builds the bundle's chunk store and scans the finished bundle for RESTRICTED
content; ``shards`` (and ``dense`` for vectors) turns the chunk store into the files a site
ships and reads them back per query; ``runtime`` is what the web worker runs inside Pyodide;
``manifest`` holds the layout constants and the format-version check both sides share. The
folder assembly (wheels, Pyodide, web runtime, ``manifest.json``) is ``site`` (``site_files``:
where the runtime files come from).
"""

from __future__ import annotations

from ragspine_lite.bundle.export import (
    MIN_NEEDLE_CHARS,
    ExportReport,
    Leak,
    Needle,
    RestrictedLeakError,
    SourceDocument,
    export_store,
    load_corpus,
    restricted_needles,
    scan_for_leaks,
    verify_no_leaks,
    write_sections,
)
from ragspine_lite.bundle.manifest import (
    BUNDLE_FORMAT_VERSION,
    BUNDLE_META_TABLE,
    FACET_FIELDS,
    MANIFEST_NAME,
    SECTION_TABLE,
    BundleFormatError,
    check_format_version,
    check_manifest,
)
from ragspine_lite.bundle.runtime import (
    BUNDLE_LIBRARY,
    DEFAULT_SEARCH_TOP_K,
    FILTER_FIELDS,
    MAX_SEARCH_TOP_K,
    PAGE_LIBRARY,
    BundleSearcher,
    SearchOutcome,
    highlight_spans,
    open_read_only_store,
    parse_filters,
)

__all__ = [
    "BUNDLE_FORMAT_VERSION",
    "BUNDLE_LIBRARY",
    "BUNDLE_META_TABLE",
    "DEFAULT_SEARCH_TOP_K",
    "FACET_FIELDS",
    "FILTER_FIELDS",
    "MANIFEST_NAME",
    "MAX_SEARCH_TOP_K",
    "MIN_NEEDLE_CHARS",
    "PAGE_LIBRARY",
    "SECTION_TABLE",
    "BundleFormatError",
    "BundleSearcher",
    "ExportReport",
    "Leak",
    "Needle",
    "RestrictedLeakError",
    "SearchOutcome",
    "SourceDocument",
    "check_format_version",
    "check_manifest",
    "export_store",
    "highlight_spans",
    "load_corpus",
    "open_read_only_store",
    "parse_filters",
    "restricted_needles",
    "scan_for_leaks",
    "verify_no_leaks",
    "write_sections",
]
