"""The s3 store for dynconf: one S3 object as a document, watched by conditional HEAD.

The plugin module (``dynconf_store_s3.plugin``) is what discovery loads; the client library
(botocore, from boto3's distribution) is imported only when a source first talks to S3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynconf.lazy import lazy_attributes
from dynconf_store_s3.plugin import PLACEHOLDER_REGION, S3_STORE, S3StoreType
from dynconf_store_s3.remote import S3

if TYPE_CHECKING:
    from dynconf_store_s3.source import AUTH_CODES, S3Settings, S3Source

__all__ = [
    "S3",
    "AUTH_CODES",
    "PLACEHOLDER_REGION",
    "S3Settings",
    "S3Source",
    "S3StoreType",
    "S3_STORE",
]

__getattr__ = lazy_attributes(
    globals(),
    {
        "AUTH_CODES": "dynconf_store_s3.source",
        "S3Settings": "dynconf_store_s3.source",
        "S3Source": "dynconf_store_s3.source",
    },
)
"""Names imported on first use (:mod:`dynconf.lazy`): plugin discovery imports this
package, and an agent that uses another store must not pay for this one's client code."""
