"""The s3 store for dynconf: one S3 object as a document, watched by conditional HEAD.

The plugin module (``dynconf_store_s3.plugin``) is what discovery loads; the client library
(botocore, from boto3's distribution) is imported only when a source first talks to S3.
"""

from dynconf_store_s3.plugin import PLACEHOLDER_REGION, S3_STORE, S3StoreType
from dynconf_store_s3.source import AUTH_CODES, S3Settings, S3Source

__all__ = ["AUTH_CODES", "PLACEHOLDER_REGION", "S3_STORE", "S3Settings", "S3Source", "S3StoreType"]
